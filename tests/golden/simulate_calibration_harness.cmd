simulate --model llama3-8b --cluster dgx-h100 --tp 8 --calibration tests/sim/calibration_data/harness_synthetic.json --seq 2048
