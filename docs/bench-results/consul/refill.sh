#!/usr/bin/env bash
# The restart runs of docs/benchmarks.md ("Consul restarted empty"): a -dev
# agent with 200 services × 2 instances restarted on an empty data
# directory, 180 of them registered again over 20 s and over 60 s, the
# bridge with default settings. Run it from the repository root under
# quiet.sh:
#   docs/bench-results/consul/quiet.sh "consul refill figures, ~3 min" \
#     docs/bench-results/consul/refill.sh SET
set -euo pipefail
set=$1
here=docs/bench-results/consul
for refill in 20s 60s; do
  SCENARIO=consul-refill "$here/run.sh" "$set/refill-$refill" --refill "$refill"
done
