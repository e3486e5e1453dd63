calibrate import tests/calibration/data/all_gather_2node.txt tests/calibration/data/not_nccl_tests.csv -o /dev/null
exit: 2
