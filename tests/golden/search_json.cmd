search --model examples/models/tiny-gpt.json --cluster dgx-a100 --nodes 1 --gbs 16 --seq 1024 --tp 2 --recompute selective --top 3 --sample 12 --format json
