memory --model llama3-8b --gpu h100 --tp-comm-overlap
exit: 2
