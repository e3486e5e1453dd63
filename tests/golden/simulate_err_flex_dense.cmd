simulate --model llama3-8b --cluster dgx-h100 --moe-token-dispatcher flex
exit: 2
