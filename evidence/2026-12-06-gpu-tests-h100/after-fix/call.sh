#!/usr/bin/env bash
# On an H200: the lab against the binary of 2026-12-02, then the GPU tests; elsewhere the
# GPU tests alone.
cd "$(dirname "$0")/.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  ORDER="new old new" CHECKS=0 timeout 300 bash scripts/gpu-run labtime > "$OUT/labtime-stdout.txt" 2>&1
  tail -5 "$OUT/labtime-stdout.txt"; cat /tmp/klab-labtime/times.txt 2>/dev/null | grep -v '^#'
fi
timeout 260 bash scripts/gpu-run tests > "$OUT/tests-stdout.txt" 2>&1
grep -v ' \.\.\. ok$' "$OUT/gpu-tests.log" | tail -80
