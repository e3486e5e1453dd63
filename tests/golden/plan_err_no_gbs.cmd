plan --model examples/models/tiny-gpt.json --tokens 1T --gpu a100 --gpus 8
exit: 2
