collective --cluster dgx-h100 --op all_reduce --ranks 0
exit: 2
