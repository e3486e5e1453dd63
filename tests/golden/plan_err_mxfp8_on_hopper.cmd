plan --model llama3-8b --tokens 1B --gpu h100 --gpus 8 --precision fp8 --fp8-recipe mxfp8 --gbs 64
exit: 2
