memory --model tests/golden/memory_hf_wrong_type.json
exit: 2
