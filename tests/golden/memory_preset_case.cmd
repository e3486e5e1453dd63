memory --model LLAMA3-8B --gpu H100 --seq 8K
