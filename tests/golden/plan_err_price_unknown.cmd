plan --model examples/models/tiny-gpt.json --tokens 1T --gpu a100 h100 --gpus 8 16 --gbs 16 --seq 1024 --threads 2 --price h200=2
exit: 2
