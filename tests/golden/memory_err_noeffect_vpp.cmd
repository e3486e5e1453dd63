memory --model llama3-8b --gpu h100 --vpp 2
exit: 2
