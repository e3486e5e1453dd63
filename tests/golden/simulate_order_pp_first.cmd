simulate --model gpt-1.7b --cluster dgx-a100 --nodes 2 --tp 2 --pp 2 --order pp-tp-cp-ep-dp --seq 512 --network analytical
