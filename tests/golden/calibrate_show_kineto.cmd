calibrate show tests/sim/calibration_data/kineto_profile.json
