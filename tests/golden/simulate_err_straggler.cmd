simulate --model examples/models/tiny-gpt.json --cluster dgx-h100 --straggler 3=0.5
exit: 2
