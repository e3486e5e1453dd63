calibrate import tests/sim/calibration_data/real_logs/nccl-tests_all_reduce_h100_32gpu_4node_vm.log -o /dev/null
