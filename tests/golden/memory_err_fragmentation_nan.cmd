memory --model llama3-8b --fragmentation nan
exit: 2
