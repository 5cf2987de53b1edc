#!/usr/bin/env python3
"""Each kernel's block medians in runs.tar.xz, before (head) and after (new) the change, and the
ratio of their medians (new / head): whether preparing beside the block before moved what a
block measures."""
import re, tarfile, statistics as st

tar = tarfile.open("runs.tar.xz")
res = {}
for name in tar.getnames():
    if not name.endswith("rounds.log"):
        continue
    run = name.split("/")[0]
    who = "head" if run.startswith("head") else "new"
    text = tar.extractfile(name).read().decode()
    for m in re.finditer(r"^kernel=(\S+) n=\S+.*?^result: median_us=([0-9.]+)", text, re.M | re.S):
        res.setdefault((run[-2:], m.group(1), who), []).append(float(m.group(2)))
for r, k in sorted({(r, k) for r, k, _ in res}):
    h, n = res[(r, k, "head")], res[(r, k, "new")]
    print(f"{r} {k:11s} head {' '.join(f'{x:.2f}' for x in sorted(h))}  new {' '.join(f'{x:.2f}' for x in sorted(n))}  new/head {st.median(n) / st.median(h):.4f}")
