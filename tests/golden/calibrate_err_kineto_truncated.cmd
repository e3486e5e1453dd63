calibrate import tests/sim/calibration_data/kineto_truncated.json -o /dev/null
exit: 2
