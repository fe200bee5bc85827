#!/bin/sh
# Prints the tables of docs/dev/bench-history.md's "Second pass" to "Eighth pass"
# sections from the raw CSVs in this directory (xdsload summarize: median
# (min–max) per implementation over the runs of each configuration). The
# optional second argument picks the files: 's*' for the second pass,
# 'third-*' for the third, 'fifth-*' for the fourth, 'sixth-*' for the
# fifth, 'seventh-*' for the sixth, 'eighth-*' for the seventh, 'ninth-*'
# for the eighth; all of them by default.
#   go build -o out/bench/xdsload ./bench/cmd/xdsload
#   sh docs/bench-results/perf/generate.sh out/bench/xdsload 'third-*'
set -eu
x=${1:-out/bench/xdsload}
d=$(dirname "$0")
for f in "$d"/${2:-*}.csv; do
  printf '\n`%s`\n' "$(basename "$f")"
  "$x" summarize "$f"
done
