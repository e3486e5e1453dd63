topo --cluster l40s-pcie
