topo --cluster dgx-h100 --nodes 2
