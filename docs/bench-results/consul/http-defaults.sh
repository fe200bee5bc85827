#!/usr/bin/env bash
# The plain-HTTP runs of docs/benchmarks.md ("Consul over plain HTTP"):
# every setting and Consul limit at its default, 2,000 services × 3
# instances, 20 unrelated registrations a second, 10 of each kind of
# change, the dev and the two-agent topologies interleaved, three runs
# each. Run it from the repository root under quiet.sh:
#   docs/bench-results/consul/quiet.sh "consul plain-HTTP figures, ~20 min" \
#     docs/bench-results/consul/http-defaults.sh SET
set -euo pipefail
set=$1
here=docs/bench-results/consul
for run in 1 2 3; do
  for topo in dev cluster; do
    "$here/run.sh" "$set/$topo-http-n2000-$run" --topology "$topo" -n 2000 --per-event 10
  done
done
