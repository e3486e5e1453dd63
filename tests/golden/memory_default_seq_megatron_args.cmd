memory --model llama3-8b --gpu h100 --megatron-args '--lr 1'
