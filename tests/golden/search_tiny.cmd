search --model examples/models/tiny-gpt.json --cluster dgx-a100 --nodes 1 --gbs 16 --seq 1024 --top 5 --threads 1
