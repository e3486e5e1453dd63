simulate --model gpt-oss-120b --cluster dgx-h100 --nodes 2 --cp 2 --ep 8 --gbs 16 --seq 4096
exit: 2
