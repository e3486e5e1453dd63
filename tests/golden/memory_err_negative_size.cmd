memory --model tests/golden/memory_negative_size.json
exit: 2
