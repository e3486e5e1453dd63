memory --model llama3-70b --cluster dgx-h100 --nodes 8 --tp 8 --pp 4 --seq 4k --format csv
