simulate --model llama3-70b --cluster dgx-h100 --megatron-args "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --num-query-groups 8 --ffn-hidden-size 14336 --swiglu --normalization RMSNorm --vocab-size 128256 --tensor-model-parallel-size 8"
exit: 2
