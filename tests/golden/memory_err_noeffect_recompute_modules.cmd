memory --model llama3-8b --gpu h100 --recompute-modules mlp
exit: 2
