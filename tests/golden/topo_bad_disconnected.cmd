topo --cluster tests/topologies/data/bad_disconnected.json
exit: 2
