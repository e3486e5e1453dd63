collective --cluster dgx-h100 --op all_reduce --calibration tests/sim/calibration_data/no_such_profile.json
exit: 2
