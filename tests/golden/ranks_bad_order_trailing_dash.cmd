ranks --cluster dgx-h100 --tp 8 --order tp-cp-ep-dp-pp-
exit: 2
