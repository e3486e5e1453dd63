memory --model mixtral-8x7b --gpu h100 --gpus 16 --tp 2 --ep 8 --zero 1 --seq 4096 --sp
