collective --cluster dgx-a100 --nodes 2 --op all_gather --ranks 16 -b 1M -e 64MiB -f 8 --algo ring --network analytical --format json
