memory --model examples/models/hf/gemma-3-27b-it --gpu h100-sxm --gpus 8 --tp 8
