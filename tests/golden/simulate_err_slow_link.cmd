simulate --model examples/models/tiny-gpt.json --cluster dgx-h100 --nodes 2 --slow-link node0/nic0:leaf9=2
exit: 2
