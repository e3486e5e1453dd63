topo --cluster tests/topologies/data/bad_huge_nodes.json
exit: 2
