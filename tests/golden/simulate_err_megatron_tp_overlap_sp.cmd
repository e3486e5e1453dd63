simulate --model llama3-8b --cluster dgx-h100 --nodes 1 --tp 8 --gbs 8 --framework megatron --tp-comm-overlap
exit: 2
