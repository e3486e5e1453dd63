simulate --model llama3-8b --cluster dgx-h100 --framework megatron --zero 3 --pp 2
exit: 2
