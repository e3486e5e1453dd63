memory --model tests/golden/memory_huge_size.json
exit: 2
