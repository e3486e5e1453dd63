simulate --model examples/models/gpt2-medium.json --cluster dgx-h100 --nodes 2 --dp-mode dataparallel
exit: 2
