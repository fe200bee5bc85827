#!/usr/bin/env bash
# Runs the Consul source's scenario (xdsload consul-events) and keeps its
# raw outputs here, one directory per run. Usage, from the repository root:
#   docs/bench-results/consul/run.sh NAME [consul-events flags...]
# It builds the bridge and xdsload from the working tree first.
set -euo pipefail
name=$1; shift
here=docs/bench-results/consul
out=$here/$name
export XDSBRIDGE_CONSUL=${XDSBRIDGE_CONSUL:-$HOME/.cache/xdsbridge/bin/consul-1.14.11}
mkdir -p out/bench "$out"
go build -o out/bench/bridge ./cmd/bridge
go build -o out/bench/xdsload ./cmd/xdsload
{
  echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' (with uncommitted changes)')"
  echo "consul: $("$XDSBRIDGE_CONSUL" version | head -1)"
  echo "started: $(date -u +%FT%TZ); load: $(cut -d' ' -f1-3 /proc/loadavg); cpus: $(nproc)"
} > "$out/meta.txt"
start=$(date +%s)
out/bench/xdsload consul-events --out "$out" "$@" 2> "$out/xdsload.stderr" 
# A client agent that stops logs one "subscribe call failed" error per
# streaming subscription (one per service read through it): megabytes that
# say only that the harness stopped it. They are counted, not kept.
for f in "$out"/consul-events.*.log; do
  n=$(grep -c 'subscribe call failed' "$f" || true)
  if [ "$n" -gt 0 ]; then
    grep -v 'subscribe call failed' "$f" > "$f.tmp" || true
    echo "($n \"subscribe call failed\" lines of the agent's shutdown left out by run.sh)" >> "$f.tmp"
    mv "$f.tmp" "$f"
  fi
done
echo "ended: $(date -u +%FT%TZ) after $(( $(date +%s) - start )) s; load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/meta.txt"
