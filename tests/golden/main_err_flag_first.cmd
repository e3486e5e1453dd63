--model llama3-8b simulate
exit: 2
