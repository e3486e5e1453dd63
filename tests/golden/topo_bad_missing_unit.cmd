topo --cluster tests/topologies/data/bad_missing_unit.json
exit: 2
