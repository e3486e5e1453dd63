memory --model llama3-8b --gpu h100 --dp 8 --overlap-param-gather
exit: 2
