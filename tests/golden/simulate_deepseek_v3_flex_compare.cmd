simulate --model deepseek-v3 --cluster dgx-h100 --nodes 128 --plan examples/plans/deepseek-v3-h100-flex.json --compare moe-token-dispatcher=alltoall
