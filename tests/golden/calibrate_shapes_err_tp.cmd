calibrate shapes --model llama3-8b --tp 3
exit: 2
