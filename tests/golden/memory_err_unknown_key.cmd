memory --model tests/golden/memory_unknown_key.json
exit: 2
