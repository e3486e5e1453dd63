collective --cluster dgx-h100 --op all_reduce -b -8 -e 8
exit: 2
