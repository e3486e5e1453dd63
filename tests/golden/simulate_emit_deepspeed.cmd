simulate --model llama3-8b --cluster dgx-h100 --tp 2 --pp 2 --zero 1 --gbs 64 --framework deepspeed --emit deepspeed
