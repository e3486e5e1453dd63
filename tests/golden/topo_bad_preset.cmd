topo --cluster dgx-h1000
exit: 2
