collective --cluster dgx-h100 --op broadcast --group 0,1,2 --root 3
exit: 2
