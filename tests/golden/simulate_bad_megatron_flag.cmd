simulate --model gpt-1.7b --cluster dgx-a100 --megatron-args "--tensor-model-paralel-size 2"
exit: 2
