memory --model llama3-8b --gpu h100 --dp 8 --zero 3 --stage3-prefetch-bucket-size 1000000
exit: 2
