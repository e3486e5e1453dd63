calibrate import tests/sim/calibration_data/kineto_train_2steps.json.gz tests/sim/calibration_data/all_gather_2node.txt -o /dev/null
