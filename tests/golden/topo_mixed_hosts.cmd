topo --cluster examples/clusters/h100_a100_mixed.json --hosts 2
