calibrate import tests/calibration/data/broadcast_malformed.txt -o /dev/null
exit: 2
