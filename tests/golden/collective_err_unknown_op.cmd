collective --cluster dgx-h100 --op allreduce
exit: 2
