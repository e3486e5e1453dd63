collective --cluster dgx-h100 --op all_reduce -b 4M -e 512M --calibration tests/sim/calibration_data/sample_profile.json
