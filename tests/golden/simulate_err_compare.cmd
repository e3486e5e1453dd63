simulate --model examples/models/tiny-gpt.json --cluster dgx-h100 --compare dp-mod=ddp
exit: 2
