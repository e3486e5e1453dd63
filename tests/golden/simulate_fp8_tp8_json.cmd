simulate --model llama3-8b --cluster dgx-h100 --nodes 1 --precision fp8 --tp 8 --gbs 8 --format json --seq 2048
