simulate --model gpt-1.7b --cluster dgx-a100 --plan examples/plans/gpt3-175b-1024.json --pp 1 --megatron-args "--sequence-parallel" --print-config
