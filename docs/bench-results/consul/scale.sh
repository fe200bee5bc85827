#!/usr/bin/env bash
# The 10,000-service runs of docs/benchmarks.md ("Consul over plain HTTP"):
# the two-agent topology over plain HTTP and over the client agent's HTTPS
# listener, every setting and Consul limit at its default, 5 of each kind
# of change. Run it from the repository root under quiet.sh:
#   docs/bench-results/consul/quiet.sh "consul 10,000-service figures, ~12 min" \
#     docs/bench-results/consul/scale.sh SET
set -euo pipefail
set=$1
here=docs/bench-results/consul
"$here/run.sh" "$set/cluster-http-n10000" --topology cluster -n 10000 --per-event 5
"$here/run.sh" "$set/cluster-https-n10000" --topology cluster --tls -n 10000 --per-event 5
