memory --model llama3-8b --gpu h100 --recompute full --selective-recompute op
exit: 2
