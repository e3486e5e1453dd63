simulate --model examples/models/tiny-gpt.json --cluster dgx-h100 --hosts 1 --dp-mode ps --ps-update ssp:x
exit: 2
