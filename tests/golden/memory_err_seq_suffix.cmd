memory --model llama3-8b --seq 8x
exit: 2
