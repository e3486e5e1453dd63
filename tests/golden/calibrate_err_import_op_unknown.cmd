calibrate import tests/sim/calibration_data/real_logs/nccl-tests_all_reduce_h100_8gpu_1node.log --op barrier -o /dev/null
exit: 2
