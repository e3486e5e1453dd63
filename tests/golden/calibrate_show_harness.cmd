calibrate show tests/sim/calibration_data/harness_synthetic.json
