topo --cluster examples/clusters/custom_4gpu_roce.json
