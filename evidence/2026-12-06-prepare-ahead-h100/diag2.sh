#!/usr/bin/env bash
# Issue 31: where a paced block's turn goes, before and after a change, and the lab by each.
#   .gpu/head/klab: the binary before; .gpu/klab: after.
export PATH=/usr/local/cuda/bin:$PATH KLAB_CACHE_DIR=/tmp/kc
lib=$(ls /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$(dirname "$lib")
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader > $OUT/gpu.txt
.gpu/klab check sgeam --sizes 64 > /dev/null 2>&1
for who in head new head new; do
  K=$PWD/.gpu/klab; [ $who = head ] && K=$PWD/.gpu/head/klab
  i=$(ls -d $OUT/$who-* 2>/dev/null | wc -l); D=$OUT/$who-$((i+1)); mkdir -p $D
  $K rounds copy naive tiled padded --baseline naive --n 4096 --rounds 2 --order alternating --out /tmp/$who$i-r1 > $D/r1.txt 2>&1; echo "$who r1 exit $?" >> $OUT/gpu.txt
  $K rounds sgeam memcpy copy_vec16 padded lean_64_cm --baseline sgeam --n 8192 --rounds 2 --order alternating --out /tmp/$who$i-r2 > $D/r2.txt 2>&1; echo "$who r2 exit $?" >> $OUT/gpu.txt
  for r in r1 r2; do grep -h "^# round\|# turns\|after its turn" /tmp/$who$i-$r/rounds.log > $D/$r-marks.txt; cp /tmp/$who$i-$r/phases.csv $D/$r-phases.csv; grep -h "^klab rounds: .* over .* blocks" $D/$r.txt | sed "s/^/$who $r: /" | cut -c1-200 >> $OUT/gpu.txt; done
done
ORDER="new old new" CHECKS=0 timeout 300 bash scripts/gpu-lab-time $PWD/.gpu/head/klab $PWD/.gpu/klab $OUT/lab
cat $OUT/gpu.txt; grep -h "from its open" $OUT/new-1/r2-marks.txt | head -3
