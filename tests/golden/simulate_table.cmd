simulate --model gpt-1.7b --cluster dgx-a100 --tp 2 --pp 2 --gbs 16 --seq 1024 --recompute full --network ideal
