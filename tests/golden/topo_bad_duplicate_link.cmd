topo --cluster tests/topologies/data/bad_duplicate_link.json
exit: 2
