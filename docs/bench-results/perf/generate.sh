#!/bin/sh
# Prints the tables of docs/benchmarks.md's "Second pass" section from the
# raw CSVs in this directory (xdsload summarize: median (min–max) per
# implementation over the runs of each configuration).
#   go build -o out/bench/xdsload ./cmd/xdsload
#   sh docs/bench-results/perf/generate.sh out/bench/xdsload
set -eu
x=${1:-out/bench/xdsload}
d=$(dirname "$0")
for f in "$d"/*.csv; do
  printf '\n`%s`\n' "$(basename "$f")"
  "$x" summarize "$f"
done
