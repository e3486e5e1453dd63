collective --cluster dgx-h100 --op all_reduce --algo rnig
exit: 2
