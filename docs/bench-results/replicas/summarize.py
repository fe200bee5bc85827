#!/usr/bin/env python3
"""Median (min-max) over runs of the replicas benchmark's figures.

Usage: summarize.py docs/bench-results/replicas/run-*/ (each holding one
directory per variant with result.json, as `xdsload replicas` writes).
"""
import json
import statistics
import sys
from pathlib import Path

MS = 1e6  # nanoseconds per millisecond


def phase(r, prefix):
    return next(p for p in r["Phases"] if p["Name"].startswith(prefix))


def per_change(reads):
    if reads.get("Unread"):
        return None, None
    n = max(reads["Changes"], 1)
    idle = reads["IdleRPC"] / reads["IdleMinutes"] * reads["Minutes"] if reads["IdleMinutes"] else 0
    return reads["RPC"] / n, (reads["RPC"] - idle) / n


def ratio(a, b):
    return None if a is None or b is None else a / b


def resent(g):
    return g["Clusters"] + g["Again"] + g["Reverts"] + g["Reapplied"]


FIGURES = [
    ("fleet served (s)", lambda r: r["Served"] / 1e9),
    ("moved clients", lambda r: r["Moved"]),
    ("changes lacked by the moved clients", lambda r: r["Lacked"]),
    ("resent to moved clients beyond what changed", lambda r: resent(r["MovedGot"])),
    ("reverts seen by moved clients", lambda r: r["MovedGot"]["Reverts"]),
    ("resent on every reconnect (all causes)", lambda r: resent(r["LaterGot"])),
    ("reverts on every reconnect", lambda r: r["LaterGot"]["Reverts"]),
    ("kill → moved client's stream open elsewhere p50 (ms)", lambda r: r["Reconnected"][0] / MS),
    ("kill → moved client's stream open elsewhere p99 (ms)", lambda r: r["Reconnected"][1] / MS),
    ("kill → moved client's stream open elsewhere max (ms)", lambda r: r["Reconnected"][2] / MS),
    ("kill → moved client current p50 (ms)", lambda r: r["Current"][0] / MS),
    ("kill → moved client current p99 (ms)", lambda r: r["Current"][1] / MS),
    ("kill → moved client current max (ms)", lambda r: r["Current"][2] / MS),
    ("retry wait p50 (ms)", lambda r: r["Steps"][0][0] / MS),
    ("stream open p99 (ms)", lambda r: r["Steps"][1][1] / MS),
    ("open → current p99 (ms)", lambda r: r["Steps"][2][1] / MS),
    ("names removed (any client)", lambda r: r["Removed"]),
    ("assignments short of an instance (any client)", lambda r: r["Short"]),
    ("reverts (any client, any stream)", lambda r: r["FirstGot"]["Reverts"] + r["LaterGot"]["Reverts"]),
    ("reconnects", lambda r: r["Reconnects"]),
    ("reconnect gap p99 (ms)", lambda r: r["Gap"][1] / MS),
    ("client-change pairs missing", lambda r: r["Missing"]),
    ("clients wrong at the end", lambda r: r["Wrong"]),
    ("window: kill until every moved client current (ms)", lambda r: r["Window"] / MS),
    ("replicas apart p50 (ms)", lambda r: r["Lag"][0] / MS),
    ("replicas apart p99 (ms)", lambda r: r["Lag"][1] / MS),
    ("p99 warm-up (ms)", lambda r: phase(r, "warm-up")["P99"] / MS),
    ("p99 in the window (ms)", lambda r: phase(r, "reconnect window")["P99"] / MS),
    ("max in the window (ms)", lambda r: phase(r, "reconnect window")["Max"] / MS),
    ("p99 after the window (ms)", lambda r: phase(r, "after the window")["P99"] / MS),
    ("p99 after the restart (ms)", lambda r: phase(r, "after the restart")["P99"] / MS),
    ("p50 after the restart (ms)", lambda r: phase(r, "after the restart")["P50"] / MS),
    ("server RPCs per change, 1 replica", lambda r: per_change(r["Reads"][0])[0]),
    ("server RPCs per change, 3 replicas", lambda r: per_change(r["Reads"][1])[0]),
    ("ratio 3 : 1", lambda r: ratio(per_change(r["Reads"][1])[0], per_change(r["Reads"][0])[0])),
    ("net of idle, 1 replica", lambda r: per_change(r["Reads"][0])[1]),
    ("net of idle, 3 replicas", lambda r: per_change(r["Reads"][1])[1]),
]


def usage(r, phase_prefix, proc):
    u = next(u for u in r["Usage"] if u["Phase"].startswith(phase_prefix))
    return 100 * u["CPU"].get(proc, 0) / 1e9 / u["Seconds"]


def rss(r, phase_prefix, proc):
    u = next(u for u in r["Usage"] if u["Phase"].startswith(phase_prefix))
    return u["RSS"].get(proc, 0) / 2**20


def num(v):
    """A figure to three significant digits, without exponents."""
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def main(dirs):
    variants = {}
    for d in dirs:
        for f in sorted(Path(d).glob("*/result.json")):
            variants.setdefault(f.parent.name, []).append(json.loads(f.read_text()))
    spreads = {}
    for d in dirs:
        for f in sorted(Path(d).glob("*/spread.csv")):
            rows = [l.split(",") for l in f.read_text().split("\n")[1:] if l]
            spreads.setdefault(f.parent.name, []).append([(float(r[0]), r[1:]) for r in rows])
    for name, runs in variants.items():
        print(f"## {name} ({len(runs)} runs)\n")
        print("| figure | median (min–max) |\n|---|---|")
        rows = list(FIGURES)
        for ph in ("warm-up", "failover", "after the restart"):
            for proc in ("load generator", "balancer", "replica-0", "replica-1", "replica-2"):
                rows.append((f"{proc} CPU % ({ph})", lambda r, ph=ph, proc=proc: usage(r, ph, proc)))
            for proc in ("load generator", "balancer", "replica-0", "replica-1", "replica-2"):
                rows.append((f"{proc} RSS MB (end of {ph})", lambda r, ph=ph, proc=proc: rss(r, ph, proc)))
        for label, f in rows:
            # A figure a run could not take (None) is left out of the median.
            vals = [v for v in (f(r) for r in runs) if v is not None]
            if not vals:
                print(f"| {label} | not taken |")
                continue
            med = statistics.median(vals)
            print(f"| {label} | {num(med)} ({num(min(vals))}–{num(max(vals))}) |")
        print()
        print("clients per replica (replica-0/1/2), by seconds from replica-0's restart, one row per run:\n")
        marks = [-90, -30, 0, 30, 60, 75, 90, 120, 150, 175]
        print("| run | " + " | ".join(f"{m} s" for m in marks) + " |")
        print("|---|" + "---|" * len(marks))
        for i, samples in enumerate(spreads.get(name, [])):
            cells = []
            for m in marks:
                at, counts = min(samples, key=lambda s: abs(s[0] - m))
                cells.append("/".join(counts) if abs(at - m) <= 1.5 else "–")
            print(f"| {i + 1} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
