topo --cluster examples/clusters/explicit_pcie_pair.json --format dot
