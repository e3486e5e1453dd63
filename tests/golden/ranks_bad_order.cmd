ranks --cluster dgx-h100 --tp 2 --order tp-xp
exit: 2
