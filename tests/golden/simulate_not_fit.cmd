simulate --model llama3-70b --cluster dgx-h100 --tp 8 --seq 2048 --network analytical
