memory --model examples/models
exit: 2
