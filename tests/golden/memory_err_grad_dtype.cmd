memory --model llama3-8b --precision fp32 --grad-dtype bf16
exit: 2
