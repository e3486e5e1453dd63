collective --cluster dgx-h100 --op all_to_all --algo ring
exit: 2
