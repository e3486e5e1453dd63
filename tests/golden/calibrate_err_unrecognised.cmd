calibrate import tests/sim/calibration_data/all_gather_2node.txt tests/sim/calibration_data/not_nccl_tests.csv -o /dev/null
exit: 2
