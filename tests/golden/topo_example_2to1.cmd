topo --cluster examples/clusters/dgx_h100_2to1.json --format json
