simulate --model gpt-1.7b --cluster examples/clusters/h100_a100_mixed.json --tp 4 --pp 2 --gbs 16 --seq 2048
