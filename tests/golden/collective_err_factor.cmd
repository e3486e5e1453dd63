collective --cluster dgx-h100 --op all_reduce -f 1
exit: 2
