topo --cluster h100
exit: 2
