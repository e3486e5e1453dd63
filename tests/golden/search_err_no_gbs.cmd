search --model examples/models/tiny-gpt.json --cluster dgx-a100 --nodes 1
exit: 2
