ranks --cluster a100-pcie-pairs --tp 2 --pp 2 --order pp-tp-cp-ep-dp
