memory --model llama3-8b --gpu h100 --tp 2 --etp 1
exit: 2
