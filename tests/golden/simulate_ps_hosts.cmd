simulate --model examples/models/tiny-gpt.json --cluster examples/clusters/ps_hosts.json --plan examples/plans/ps_async.json --steps 4 --straggler 5=1.5
