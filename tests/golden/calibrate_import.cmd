calibrate import tests/calibration/data/all_reduce_1node_noisy.txt tests/calibration/data/all_gather_2node.txt tests/calibration/data/reduce_scatter_truncated.txt -o /dev/null
