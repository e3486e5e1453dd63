memory --model examples/models/does-not-exist.json
exit: 2
