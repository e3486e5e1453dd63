simulate --model examples/models/hf/gemma-2-9b-it/config.json --cluster dgx-h100 --nodes 1 --megatron-args "--num-layers 42 --hidden-size 3584 --num-attention-heads 16 --group-query-attention --num-query-groups 8 --kv-channels 256 --ffn-hidden-size 14336 --normalization RMSNorm --disable-bias-linear --attention-dropout 0 --hidden-dropout 0 --tensor-model-parallel-size 8"
exit: 2
