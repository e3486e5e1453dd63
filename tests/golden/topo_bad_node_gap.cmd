topo --cluster tests/topologies/data/bad_node_gap.json
exit: 2
