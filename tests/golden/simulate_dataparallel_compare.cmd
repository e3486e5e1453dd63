simulate --model examples/models/gpt2-medium.json --cluster dgx-h100 --plan examples/plans/dataparallel.json --compare dp-mode=ddp
