simulate --model examples/models/tiny-gpt.json --cluster dgx-h100 --ps-servers 2
exit: 2
