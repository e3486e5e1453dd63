simulate --model qwen3-30b-a3b --cluster dgx-b200 --nodes 1 --ep 8 --etp 1 --precision fp8 --gbs 16 --seq 4096 --cuda-graphs on --cuda-graph-scope attn,moe_router,moe_preprocess
