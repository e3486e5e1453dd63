simulate --model llama3-8b --cluster dgx-h100 --nodes 2 --tp 2 --pp 2 --sp --zero 1 --gbs 256 --recompute selective --overlap-grad-reduce --emit megatron
