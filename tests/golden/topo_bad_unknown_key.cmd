topo --cluster tests/topologies/data/bad_unknown_key.json
exit: 2
