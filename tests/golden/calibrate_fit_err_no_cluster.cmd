calibrate fit --runs examples/calibration/runs_synthetic.json -o /dev/null
exit: 2
