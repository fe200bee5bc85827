#!/usr/bin/env python3
"""Tables of median (min-max) per configuration from an `xdsload bench` log.

The 2026-12-03 `make bench-full` left its log but not its CSV (a second
invocation started by mistake rewrote out/bench/full/results.csv), so the
figures of the ninth pass (docs/dev/bench-history.md) and the table of every
configuration of the latest full run (docs/benchmarks.md) come from the
log's lines:
"cold start" (time), "server memory right after the changes" and
"... once quiet" (rss), "memory high" (the reconnect's RSS samples; the
largest is the peak), and "done" (convergence p99, server CPU and bytes
per client-change, failed). S4's run names carry no rate: its three
steps run in the order 100, 300, 1000 changes/s within each round.

    python3 docs/bench-results/full/summarize-log.py docs/bench-results/full/xdsload.log
"""
import re
import statistics
import sys
from collections import defaultdict

S4_RATES = ["100/s", "300/s", "1000/s"]
kv = re.compile(r'(\w[\w/·]*)=("[^"]*"|\S+)')


def dur(s):
    """Seconds from a Go duration string (1m2.5s, 450ms, 12µs)."""
    total = 0.0
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}
    for m in re.finditer(r"([\d.]+)(h|ms|m|s|µs|us|ns)", s):
        total += float(m.group(1)) * units[m.group(2)]
    return total


def main(path):
    runs = defaultdict(dict)  # (config, rep) -> figures
    order = []
    s4_seen = defaultdict(int)
    cur = {}  # log run id -> key
    for line in open(path, encoding="utf-8"):
        f = dict((k, v.strip('"')) for k, v in kv.findall(line))
        msg, rid = f.get("msg"), f.get("run") or f.get("id")
        if msg == "run":
            base, rep = re.match(r"(.*?)(?:-r(\d+))?$", rid).groups()
            rep = int(rep or 0)
            cfg = base
            if base.startswith("S4-"):
                i = s4_seen[(base, rep)]
                s4_seen[(base, rep)] += 1
                cfg = f"{base} {S4_RATES[i]}"
            cur[rid] = (cfg, rep)
            if cfg not in order:
                order.append(cfg)
            continue
        if rid not in cur:
            continue
        r = runs[cur[rid]]
        if msg == "cold start":
            r["cold start s"] = dur(f["time"])
        elif msg == "server memory right after the changes":
            r["RSS right after MB"] = int(f["rss"]) / 1e6
        elif msg == "server memory once quiet":
            r["RSS once quiet MB"] = int(f["rss"]) / 1e6
        elif msg == "memory high":
            r["reconnect peak RSS MB"] = max(r.get("reconnect peak RSS MB", 0), int(f["rss_mb"]) * 1.048576)
        elif msg == "done":
            r["failed"] = f["failed"] == "true"
            if not r["failed"]:
                r["conv p99 ms"] = dur(f["conv_p99"]) * 1e3
                r["CPU/client·change µs"] = dur(f["cpu/client·change"]) * 1e6
                r["bytes/client·change"] = float(f["bytes/client·change"])
    cols = ["cold start s", "conv p99 ms", "CPU/client·change µs", "bytes/client·change",
            "RSS right after MB", "RSS once quiet MB", "reconnect peak RSS MB"]
    print("| configuration | runs (failed) | " + " | ".join(cols) + " |")
    print("|---|---:|" + "---:|" * len(cols))
    for cfg in order:
        reps = [r for (c, _), r in sorted(runs.items()) if c == cfg]
        ok = [r for r in reps if not r.get("failed")]
        cells = []
        for c in cols:
            v = [r[c] for r in ok if c in r and r[c] > 0]
            if not v:
                cells.append("–")
                continue
            fmt = "{:.0f}" if max(v) >= 100 else "{:.1f}" if max(v) >= 10 else "{:.2f}"
            m = fmt.format(statistics.median(v))
            cells.append(m if len(v) == 1 else f"{m} ({fmt.format(min(v))}–{fmt.format(max(v))})")
        failed = len(reps) - len(ok)
        print(f"| {cfg} | {len(ok)} ({failed}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
