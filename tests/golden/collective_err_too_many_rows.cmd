collective --cluster dgx-h100 --op all_reduce -b 8 -e 1G -f 1.001
exit: 2
