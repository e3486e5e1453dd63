calibrate import tests/sim/calibration_data/broadcast_malformed.txt -o /dev/null
exit: 2
