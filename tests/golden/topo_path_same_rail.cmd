topo --cluster dgx-h100 --nodes 2 --path 0 8
