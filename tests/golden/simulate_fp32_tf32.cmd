simulate --model gpt-1.7b --cluster dgx-a100 --tp 8 --precision fp32 --seq 512 --network ideal
