calibrate import tests/sim/calibration_data/real_logs/nccl-tests_all_reduce_h100_16gpu_2node_gcp-a3mega.log tests/sim/calibration_data/real_logs/nccl-tests_all_reduce_h100_8gpu_1node.log -o /dev/null
