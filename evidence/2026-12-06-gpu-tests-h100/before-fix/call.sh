#!/usr/bin/env bash
# The three GPU tests that failed at 93ba9a09, then on an H200 the lab against 91ca4778.
cd "$(dirname "$0")/.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "card: $gpu"
TEST_BINS=gpu TEST_FILTER="a_kernel_past_the_default_shared_memory half_precision_scalars_reach precompiled_modules_and_template" timeout 200 bash scripts/gpu-run tests > "$OUT/tests-stdout.txt" 2>&1
grep -v '^test .* ok$' "$OUT/gpu-tests.log" | tail -120
if [[ "$gpu" == *H200* ]]; then
  ORDER="new old new" CHECKS=0 timeout 330 bash scripts/gpu-run labtime 2>&1 | tail -40
fi
