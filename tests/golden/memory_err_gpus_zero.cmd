memory --model llama3-8b --gpus 0
exit: 2
