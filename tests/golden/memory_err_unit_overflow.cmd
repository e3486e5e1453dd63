memory --model llama3-8b --cuda-context 1e300GB
exit: 2
