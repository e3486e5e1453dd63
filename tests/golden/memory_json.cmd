memory --model gpt3-175b --gpu a100-80gb --tp 8 --pp 8 --gbs 64 --sp --recompute selective --format json
