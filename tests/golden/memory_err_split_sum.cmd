memory --model llama3-8b --pp 4 --pipeline-split 8,8,8,7
exit: 2
