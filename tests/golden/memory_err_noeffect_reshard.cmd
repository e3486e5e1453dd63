memory --model llama3-8b --gpu h100 --dp 8 --zero 3 --fsdp-impl deepspeed --reshard-after-forward off
exit: 2
