memory --model llama3-8b --gpu h100 --flash-attention off --attention-kernel fa2
exit: 2
