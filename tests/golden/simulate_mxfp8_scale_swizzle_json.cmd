simulate --model qwen3-30b-a3b --cluster dgx-b200 --nodes 1 --ep 8 --etp 1 --precision fp8 --fp8-recipe mxfp8 --scale-swizzle on --gbs 16 --seq 4096 --format json
