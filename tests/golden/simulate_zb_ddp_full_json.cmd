simulate --model llama3-8b --cluster dgx-h100 --nodes 4 --tp 4 --pp 4 --schedule zb --gbs 32 --dp 2 --overlap-grad-reduce --format json --full --seq 2048
