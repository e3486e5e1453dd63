memory --model llama3-8b --gpu h100 --mtp off
exit: 2
