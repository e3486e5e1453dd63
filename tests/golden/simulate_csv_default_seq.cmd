simulate --model llama3-8b --cluster dgx-h100 --tp 8 --network analytical --format csv
