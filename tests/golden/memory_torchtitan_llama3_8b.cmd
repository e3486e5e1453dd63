memory --model llama3-8b --gpu h100 --gpus 64 --torchtitan examples/plans/torchtitan-llama3-8b.toml --print-config
