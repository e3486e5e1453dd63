memory --model tests/golden/memory_zero_size.json
exit: 2
