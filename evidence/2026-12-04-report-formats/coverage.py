# How often the round bootstrap calls an A/A pair different when its rounds are drawn, one
# by one, from the A/A round ratios the H200 measured (calls 4 and 5, graph:10, n = 1024),
# each divided by their median so that the true ratio is 1. Run from this folder after
#   mkdir -p /tmp/cal && tar xzf calibration.tar.gz -C /tmp/cal
# python3 coverage.py > coverage.txt
import glob, json, random, statistics

ratios = []
for f in sorted(glob.glob("/tmp/cal/outputs/call[45]/klab-calibration/run-copy_b-*/summary.json")):
    ratios += json.load(open(f))["analyses"][0]["analysis"]["round_ratios"]
m = statistics.median(ratios)
pool = [r / m for r in ratios]
print(f"{len(ratios)} A/A round ratios, median {m:.5f}, sd {statistics.pstdev(ratios):.5f}")


def q(s, p):  # klab's quantile rule: linear at p(N-1)
    pos = p * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


random.seed(1)
for n in (5, 6, 7, 8, 10, 12, 15, 20):
    trials, called = 1000, 0
    for _ in range(trials):
        x = [random.choice(pool) for _ in range(n)]
        reps = sorted(statistics.median(random.choices(x, k=n)) for _ in range(1000))
        lo, hi = q(reps, 0.025), q(reps, 0.975)
        called += lo > 1 or hi < 1
    print(f"{n:2d} rounds: called different in {called} of {trials}")
