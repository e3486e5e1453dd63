plan --model llama3-8b --cluster dgx-h100
exit: 2
