calibrate show tests/sim/calibration_data/sample_profile.json
