calibrate show tests/calibration/data/sample_profile.json
