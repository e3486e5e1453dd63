memory --model llama3-8b --gpu h100 --dp 8 --fsdp-impl deepspeed
exit: 2
