#!/usr/bin/env bash
# One device call: the GPU tests on any card; on an H200, then the lab alternated against
# the binary of 2026-12-02 (.gpu/old/klab).
cd "$(dirname "$0")/.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
case "$name" in
  *H200*) ORDER="new old new old new" CHECKS=0 timeout 560 bash scripts/gpu-run tests labtime ;;
  *) timeout 400 bash scripts/gpu-run tests ;;
esac
