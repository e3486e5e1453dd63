search --model examples/models/tiny-gpt.json --cluster dgx-a100 --nodes 1 --gbs 16 --top 0
exit: 2
