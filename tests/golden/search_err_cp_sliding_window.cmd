search --model gpt-oss-20b --cluster dgx-h100 --nodes 2 --cp 2 --gbs 64 --seq 4096
exit: 2
