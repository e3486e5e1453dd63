simulate --model gpt-1.7b --cluster dgx-h100 --tp 2 --gbs 16 --seq 2048 --steps 4 --straggler 0=1.2 --straggler-random 0.25:2 --seed 3
