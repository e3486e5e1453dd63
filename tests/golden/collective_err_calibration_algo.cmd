collective --cluster dgx-h100 --op all_reduce --algo ring --calibration examples/calibration/fitted_synthetic.json
exit: 2
