calibrate import tests/calibration/data/no_such_log.txt -o /dev/null
exit: 2
