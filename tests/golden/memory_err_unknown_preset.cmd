memory --model llama3-8
exit: 2
