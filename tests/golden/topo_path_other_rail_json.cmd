topo --cluster dgx-h100 --gpus 16 --path 0 9 --format json
