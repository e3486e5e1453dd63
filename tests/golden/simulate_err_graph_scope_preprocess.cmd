simulate --model qwen3-30b-a3b --cluster dgx-b200 --nodes 1 --ep 8 --etp 1 --cuda-graphs on --cuda-graph-scope attn,moe_preprocess
exit: 2
