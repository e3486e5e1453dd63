collective --cluster dgx-h100 --op all_reduce --root 3
exit: 2
