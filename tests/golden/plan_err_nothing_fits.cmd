plan --model llama3-70b --tokens 1T --gpu a100 --gpus 8 --gbs 16 --threads 2
exit: 3
