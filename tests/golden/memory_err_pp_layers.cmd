memory --model llama3-8b --pp 5
exit: 2
