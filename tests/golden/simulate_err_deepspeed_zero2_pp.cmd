simulate --model llama3-8b --cluster dgx-h100 --framework deepspeed --zero 2 --pp 2
exit: 2
