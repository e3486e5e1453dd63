plan --model llama3-70b --tokens 15T --gpu h100 h200 b200 --gpus 2048 4096 8192 --gbs 2048 --seq 8192 --price h100=2.00 h200=2.50 b200=3.50 --days 30 --threads 2
