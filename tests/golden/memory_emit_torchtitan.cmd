memory --model llama3-8b --gpu h100 --gpus 16 --tp 2 --zero 3 --gbs 64 --recompute full --emit torchtitan
