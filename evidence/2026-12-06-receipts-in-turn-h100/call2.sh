#!/usr/bin/env bash
# Issue 31: the GPU tests on the bundle, then the lab alternated: .gpu/klab (the receipts'
# benches paced) against .gpu/old/klab (here the binary of 88cd38ae), all in one file.
cd "$(dirname "$0")/.."
mkdir -p $OUT/c2
OUT=$OUT/c2 ORDER="new old new old" CHECKS=0 bash scripts/gpu-run tests labtime > $OUT/c2/stdout.txt 2>&1; echo "gpu-run exit $?" > $OUT/c2/status.txt
cd $OUT && tar -czf c2.tgz c2 && rm -rf c2
