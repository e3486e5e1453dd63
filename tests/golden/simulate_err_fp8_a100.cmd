simulate --model llama3-8b --cluster dgx-a100 --nodes 1 --tp 8 --gbs 8 --precision fp8
exit: 2
