simulate --model examples/models/tiny-gpt.json --cluster dgx-h100 --dp-mode ps --ps-servers 2
exit: 2
