simulate --model gpt-1.7b --cluster dgx-a100 --tp 2 --order tp-dp-xx
exit: 2
