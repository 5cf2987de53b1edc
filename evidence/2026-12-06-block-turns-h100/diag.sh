#!/usr/bin/env bash
# Where a paced block's turn goes: two short rounds like the lab's rounds and ceilings steps.
export PATH=/usr/local/cuda/bin:$PATH KLAB_CACHE_DIR=/tmp/kc
lib=$(ls /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$(dirname "$lib")
K=$PWD/.gpu/klab
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader > $OUT/gpu.txt
$K check sgeam --sizes 64 > /dev/null 2>&1
$K rounds copy naive tiled padded --baseline naive --n 4096 --rounds 2 --order alternating --out /tmp/r1 > $OUT/r1.txt 2>&1; echo "r1 exit $?" >> $OUT/gpu.txt
$K rounds sgeam memcpy copy_vec16 padded lean_64_cm --baseline sgeam --n 8192 --rounds 2 --order alternating --out /tmp/r2 > $OUT/r2.txt 2>&1; echo "r2 exit $?" >> $OUT/gpu.txt
for r in r1 r2; do grep -h "^# round\|# turns\|after its turn" /tmp/$r/rounds.log > $OUT/$r-marks.txt; cp /tmp/$r/phases.csv $OUT/$r-phases.csv; done
cat $OUT/gpu.txt; grep -h "after its turn" $OUT/r1-marks.txt | head -3
