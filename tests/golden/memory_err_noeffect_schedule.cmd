memory --model llama3-8b --gpu h100 --schedule zb
exit: 2
