memory --model llama3-8b --gpu h100 --zero 1
exit: 2
