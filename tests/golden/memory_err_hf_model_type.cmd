memory --model tests/golden/memory_hf_unknown_type.json
exit: 2
