memory --model llama3-8b --gpu h100 --dp-bucket-size 40MB
exit: 2
