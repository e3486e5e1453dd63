simulate --model llama3-8b --cluster dgx-h100 --tp 8 --calibration examples/calibration/fitted_synthetic.json --seq 2048
