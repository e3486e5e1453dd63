simulate --model llama3-8b --cluster dgx-h100 --nodes 1 --dp 8 --zero 3 --mbs 2 --gbs 16 --seq 8192 --recompute selective --format json
