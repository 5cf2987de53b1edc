# From each block's `# turns:` line (the parent's clock, from the block's turn) and its
# child's `after its turn:` line (the child's clock, from when it got that turn): how late the
# next block was ready, and how long from its open turn that took, against its session's
# seconds in phases.csv. The parent reads a launches-over line within a 10 ms poll, so "late"
# can read up to 0.01 s high.
import csv, re, sys

for r in ["r1", "r2"]:
    lines = open(f"{r}-marks.txt").read().split("\n")
    turns = [l for l in lines if l.startswith("# turns")]
    marks = [l for l in lines if "after its turn" in l]
    phases = list(csv.DictReader(open(f"{r}-phases.csv")))
    print(f"{r}: interval (over to released), next block late after its turn, next ready after its open turn, its setup+compile, the rest")
    for k in range(len(turns) - 1):
        m = re.search(r"launches over \+([0-9.]+) s, device released \+([0-9.]+) s", turns[k])
        if not m:
            continue
        interval = float(m[2]) - float(m[1])
        seen = float(re.search(r"launches over \+([0-9.]+)", turns[k + 1])[1])
        own = float(re.search(r"launches over \+([0-9.]+)", marks[k + 1])[1])
        late = seen - own
        ready = interval + late
        session = float(phases[k + 1]["setup_s"]) + float(phases[k + 1]["compile_s"])
        print(f"  {interval:.3f}  {late:.3f}  {ready:.3f}  {session:.3f}  {ready - session:.3f}")
