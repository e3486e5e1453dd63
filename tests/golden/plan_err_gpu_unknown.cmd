plan --model examples/models/tiny-gpt.json --tokens 1T --gpu h1000 --gbs 16
exit: 2
