memory --model examples/models/small-moe.json --tp 2 --ep 4 --dp 4 --format json
