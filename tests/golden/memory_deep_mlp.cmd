memory --model examples/models/deep-mlp.json --gpu rtx4090 --mbs 256 --precision fp32 --optimizer sgd-momentum
