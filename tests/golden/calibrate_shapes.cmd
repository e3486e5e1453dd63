calibrate shapes --model llama3-8b --tp 2
