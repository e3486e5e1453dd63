calibrate fit --runs examples/calibration/runs_synthetic.json --cluster dgx-h100 -o /dev/null
