topo --cluster tests/topologies/data/bad_zero_bandwidth.json
exit: 2
