memory --model gpt-7.5b --gpu a100-80gb --dp 64 --zero 3 --precision fp16 --grad-dtype bf16 --recompute full
