calibrate import tests/sim/calibration_data/no_such_log.txt -o /dev/null
exit: 2
