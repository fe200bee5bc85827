#!/usr/bin/env bash
# Runs one of the Consul source's scenarios (xdsload consul-events, or the
# one named by SCENARIO, such as consul-refill) and keeps its raw outputs
# here, one directory per run. Usage, from the repository root:
#   [SCENARIO=consul-refill] docs/bench-results/consul/run.sh NAME [flags...]
# It builds the bridge and xdsload from the working tree first.
set -euo pipefail
name=$1; shift
here=docs/bench-results/consul
out=$here/$name
export XDSBRIDGE_CONSUL=${XDSBRIDGE_CONSUL:-$HOME/.cache/xdsbridge/bin/consul-1.14.11}
mkdir -p out/bench "$out"
# The commit is read before the build, so that it names what was built.
commit="$(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' (with uncommitted changes)')"
go build -o out/bench/bridge ./cmd/bridge
go build -o out/bench/xdsload ./bench/cmd/xdsload
{
  echo "commit: $commit"
  echo "consul: $("$XDSBRIDGE_CONSUL" version | head -1)"
  echo "started: $(date -u +%FT%TZ); load: $(cut -d' ' -f1-3 /proc/loadavg); cpus: $(nproc)"
} > "$out/meta.txt"
start=$(date +%s)
rc=0
out/bench/xdsload "${SCENARIO:-consul-events}" --out "$out" "$@" 2> "$out/xdsload.stderr" || rc=$?
# A client agent that stops logs one "subscribe call failed" error per
# streaming subscription (one per service read through it): megabytes that
# say only that the harness stopped it. They are counted, not kept.
for f in "$out"/consul-*.log; do
  n=$(grep -c 'subscribe call failed' "$f" || true)
  if [ "$n" -gt 0 ]; then
    grep -v 'subscribe call failed' "$f" > "$f.tmp" || true
    echo "($n \"subscribe call failed\" lines of the agent's shutdown left out by run.sh)" >> "$f.tmp"
    mv "$f.tmp" "$f"
  fi
done
echo "ended: $(date -u +%FT%TZ) after $(( $(date +%s) - start )) s, exit status $rc; load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/meta.txt"
exit $rc
