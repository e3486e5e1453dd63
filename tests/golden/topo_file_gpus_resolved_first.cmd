topo --cluster tests/topologies/data/no_fabric_nodes4.json --gpus 4
