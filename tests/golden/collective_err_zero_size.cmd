collective --cluster dgx-h100 --op all_reduce -b 0 -e 8
exit: 2
