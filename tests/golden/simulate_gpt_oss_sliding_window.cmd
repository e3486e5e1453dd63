simulate --model gpt-oss-120b --cluster dgx-h100 --nodes 8 --pp 4 --ep 8 --etp 1 --zero 1 --gbs 64 --seq 4096 --recompute selective --recompute-modules layernorm,moe_act
