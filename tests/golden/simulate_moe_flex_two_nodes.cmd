simulate --model qwen3-30b-a3b --cluster dgx-h100 --nodes 2 --ep 16 --gbs 32 --seq 2048 --moe-token-dispatcher flex
