# Medians per benchmark and unit of two `go test -bench` outputs, and the
# change from the first to the second: python3 medians.py before.txt after.txt
import re, sys, statistics, collections
def load(p):
    d = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in open(p):
        if not line.startswith('Benchmark'):
            continue
        f = line.split()
        name = re.sub(r'-\d+$', '', f[0])
        for i in range(2, len(f) - 1, 2):
            try:
                d[name][f[i + 1]].append(float(f[i]))
            except ValueError:
                pass
    return d
a, b = load(sys.argv[1]), load(sys.argv[2])
for name in a:
    for unit in a[name]:
        if unit not in b.get(name, {}):
            continue
        x, y = statistics.median(a[name][unit]), statistics.median(b[name][unit])
        delta = (y - x) / x * 100 if x else 0
        print(f"{name:40s} {unit:24s} {x:12.3f} {y:12.3f} {delta:+6.1f}%  n={len(a[name][unit])}/{len(b[name][unit])}")
