topo --cluster tests/topologies/data/bad_undefined_vertex.json
exit: 2
