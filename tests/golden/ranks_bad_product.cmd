ranks --cluster dgx-h100 --nodes 2 --tp 2 --pp 2 --dp 2
exit: 2
