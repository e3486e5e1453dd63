topo --cluster dgx-h100 --path 0 7
