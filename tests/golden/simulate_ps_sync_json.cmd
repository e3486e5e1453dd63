simulate --model examples/models/tiny-gpt.json --cluster dgx-h100 --hosts 2 --dp-mode ps --ps-servers 2 --ps-shard tensor --steps 2 --format json
