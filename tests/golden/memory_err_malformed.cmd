memory --model tests/golden/memory_malformed.json
exit: 2
