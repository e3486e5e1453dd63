memory --model examples/models/hf/mixtral-8x7b --dp 8 --ep 8 --zero 1
