search --model gpt3-175b --cluster dgx-a100 --nodes 1 --gbs 8
exit: 3
