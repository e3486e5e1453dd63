simulate --model llama3-8b --cluster dgx-h100 --nodes 4 --tp 4 --pp 2 --vpp 2 --dp 4 --zero 1 --overlap-grad-reduce --overlap-param-gather --gbs 64 --format json --seq 2048
