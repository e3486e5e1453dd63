collective --cluster dgx-h100 --op all_gather -b 1K -e 1M -f 32 --format csv
