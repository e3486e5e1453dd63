simulate --model llama3-8b --cluster dgx-h100 --nodes 2 --tp 4 --cp 2 --dp 2 --gbs 16 --seq 16384 --sp --format json --full
