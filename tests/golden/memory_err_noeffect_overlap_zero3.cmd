memory --model llama3-8b --gpu h100 --dp 8 --zero 3 --overlap-grad-reduce
exit: 2
