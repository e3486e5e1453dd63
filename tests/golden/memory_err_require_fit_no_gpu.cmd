memory --model llama3-8b --require-fit
exit: 2
