ranks --cluster dgx-h100 --tp 2 --pp 2 --format csv
