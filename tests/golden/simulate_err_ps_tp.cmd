simulate --model examples/models/tiny-gpt.json --cluster dgx-h100 --hosts 1 --dp-mode ps --tp 2
exit: 2
