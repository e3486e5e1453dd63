topo --cluster dgx-h100 --format json
