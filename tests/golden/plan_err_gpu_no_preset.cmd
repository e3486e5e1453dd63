plan --model examples/models/tiny-gpt.json --tokens 1T --gpu mi300x --gbs 16
exit: 2
