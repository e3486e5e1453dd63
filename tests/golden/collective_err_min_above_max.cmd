collective --cluster dgx-h100 --op all_reduce -b 8K -e 8
exit: 2
