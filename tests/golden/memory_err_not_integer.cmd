memory --model llama3-8b --tp 1.5
exit: 2
