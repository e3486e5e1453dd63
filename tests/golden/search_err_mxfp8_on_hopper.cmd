search --model llama3-8b --cluster dgx-h100 --nodes 1 --precision fp8 --fp8-recipe mxfp8 --gbs 64
exit: 2
