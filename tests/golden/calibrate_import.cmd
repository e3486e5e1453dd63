calibrate import tests/sim/calibration_data/all_reduce_1node_noisy.txt tests/sim/calibration_data/all_gather_2node.txt tests/sim/calibration_data/reduce_scatter_truncated.txt -o /dev/null
