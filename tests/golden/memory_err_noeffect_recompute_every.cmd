memory --model llama3-8b --gpu h100 --recompute-every 2
exit: 2
