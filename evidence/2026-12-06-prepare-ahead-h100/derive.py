#!/usr/bin/env python3
"""Issue 31: per run of diag2.sh, from each rounds.log in runs.tar.xz, where a paced block's
share of the run went: the block before's interval from launches over to device released
(the parent's clock), how late the block was for its turn to start (the parent's launches
over less the child's, both from its turn), and the child's own marks from its open turn."""
import re, tarfile, statistics as st

tar = tarfile.open("runs.tar.xz")
num = r"\+?([0-9.]+) s"
for name in sorted(n for n in tar.getnames() if n.endswith("rounds.log")):
    text = tar.extractfile(name).read().decode()
    turns = [l for l in text.splitlines() if l.startswith("# turns:")]
    marks = [l for l in text.splitlines() if l.startswith("klab bench: ") and "after its turn" in l]
    rows = []
    for i in range(1, min(len(turns), len(marks))):
        before = turns[i - 1]
        over = float(re.search(r"launches over " + num, before).group(1))
        rel = re.search(r"device released " + num, before)
        p_over = float(re.search(r"launches over " + num, turns[i]).group(1))
        c_over = float(re.search(r"launches over " + num, marks[i].split("after its turn")[1]).group(1))
        so = re.search(r"session open " + num, marks[i])
        prep = re.search(r"prepared in ([0-9.]+) s, then waited ([0-9.]+) s", marks[i])
        rows.append((
            float(rel.group(1)) - over if rel else float("nan"),
            p_over - c_over,
            float(so.group(1)) if so else float("nan"),
            prep.group(1) + "/" + prep.group(2) if prep else "-",
        ))
    print(f"{name}: {len(rows)} blocks after the first")
    print("  before's over-to-released, late for its turn, session open after its open turn, prepared/waited")
    for r in rows:
        print(f"  {r[0]:.3f}  {r[1]:.3f}  {r[2]:.3f}  {r[3]}")
    for k, label in ((0, "over-to-released"), (1, "late"), (2, "session open")):
        v = [r[k] for r in rows if r[k] == r[k]]
        print(f"  median {label}: {st.median(v):.3f} s")
