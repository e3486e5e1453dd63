collective --cluster dgx-h100 --op all_reduce --group 0,1,1
exit: 2
