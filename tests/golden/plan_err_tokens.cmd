plan --model examples/models/tiny-gpt.json --tokens 15X --gbs 16
exit: 2
