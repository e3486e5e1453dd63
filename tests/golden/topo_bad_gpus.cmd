topo --cluster dgx-h100 --gpus 12
exit: 2
