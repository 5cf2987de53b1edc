#!/usr/bin/env bash
# On an H200: the lab against the binary of 2026-12-02, alternated (new old new);
# elsewhere the two GPU tests whose assertions changed since their last GPU run.
cd "$(dirname "$0")/.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "card: $gpu"
if [[ "$gpu" != *H200* ]]; then
  TEST_BINS=gpu TEST_FILTER="a_kernel_for_multiples_of_4 half_precision_scalars_reach" timeout 120 bash scripts/gpu-run tests > "$OUT/tests-stdout.txt" 2>&1
  grep -v ' \.\.\. ok$' "$OUT/gpu-tests.log" | tail -30; grep -c ' \.\.\. ok$' "$OUT/gpu-tests.log"
  exit 0
fi
ORDER="new old new" CHECKS=0 timeout 300 bash scripts/gpu-run labtime > "$OUT/labtime-stdout.txt" 2>&1
tail -3 "$OUT/labtime-stdout.txt"; cat /tmp/klab-labtime/times.txt 2>/dev/null
