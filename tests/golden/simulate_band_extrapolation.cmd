simulate --model examples/models/tiny-gpt.json --cluster l40s-pcie --gbs 8 --seq 1024 --network ideal
