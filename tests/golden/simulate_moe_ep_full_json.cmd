simulate --model mixtral-8x7b --cluster dgx-h100 --nodes 2 --tp 2 --ep 8 --gbs 32 --format json --full --seq 2048
