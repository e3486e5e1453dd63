collective --cluster dgx-h100 --op all_reduce --group 0,99
exit: 2
