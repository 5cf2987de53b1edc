#!/usr/bin/env bash
# Whether a block's process opening its context beside the block before's launches
# (--open-ahead beside-launches) moves what that block times: the A/A pair of the
# calibration copies at size N (default 1024, about 7 us) under each --open-ahead value,
# alternating after, beside, after, beside, for each of TIMERS (default "graph:10 per-launch").
# open-ahead.txt: per run, the rounds' wall and blocks, each kernel's mean block median and
# the A/A ratio; then per timer and value, the mean of every block median.
#   bash scripts/gpu-open-ahead KLAB DIR
set -uo pipefail
K=$1
D=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
M=$ROOT/examples/calibration/calibration.toml
N=${N:-1024}
ROUNDS=${ROUNDS:-10}
mkdir -p "$D"
cd "$D" || exit 1
for timer in ${TIMERS:-graph:10 per-launch}; do
  for i in 1 2; do
    for mode in after-launches beside-launches; do
      out=$mode-${timer%%:*}-$i
      "$K" rounds "$M:copy_a" "$M:copy_b" --n "$N" --timer "$timer" --rounds "$ROUNDS" \
        --open-ahead "$mode" --out "$out" > "$out.txt" 2> "$out.err"
      echo "$out exit $?"
      # The turns lines stay (they say when the next block opened); the folders do not.
      grep -h "^# turns:" "$out/rounds.log" > "$out.turns" 2>/dev/null
      rm -rf "$out/blocks"
    done
  done
done
python3 - > open-ahead.txt <<'PY'
import csv, glob, json, statistics
by = {}
print("run wall_s blocks overlapped_s copy_a_mean_us copy_b_mean_us ratio interval")
for d in sorted(glob.glob("*-launches-*-[0-9]")):
    try:
        s = json.load(open(f"{d}/summary.json"))
        rows = list(csv.DictReader(open(f"{d}/rounds.csv")))
    except OSError:
        print(d, "no summary")
        continue
    mode, timer = d.split("-launches-")[0], d.split("-launches-")[1].rsplit("-", 1)[0]
    med = {}
    for r in rows:
        med.setdefault(r["variant"], []).append(float(r["median_us"]))
        by.setdefault((timer, mode), []).append(float(r["median_us"]))
    a = s["analyses"][0]["analysis"]
    t = s.get("time") or {}
    iv = a.get("interval") or [None, None]
    print(d, round(t.get("wall_s", 0), 2), s.get("blocks"), round(t.get("overlapped_s", 0), 2),
          *(f"{statistics.mean(med[k]):.4f}" for k in sorted(med)), round(a["ratio"], 4), iv)
print()
print("timer open-ahead blocks mean_of_block_medians_us stdev_us")
for (timer, mode), v in sorted(by.items()):
    print(timer, mode, len(v), f"{statistics.mean(v):.4f}", f"{statistics.stdev(v):.4f}")
PY
cat open-ahead.txt
