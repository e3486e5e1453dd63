calibrate show examples/calibration/fitted_synthetic.json
