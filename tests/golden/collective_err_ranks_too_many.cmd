collective --cluster dgx-h100 --op all_reduce --ranks 16
exit: 2
