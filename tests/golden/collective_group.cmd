collective --cluster dgx-h100 --nodes 2 --op broadcast --group 0,8,3,11 -b 1K -e 1G -f 1024 --root 1
