topo --cluster dgx-h100 --path 0 99
exit: 2
