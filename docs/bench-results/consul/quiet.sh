#!/usr/bin/env bash
# Runs a command while /tmp/xdsbridge-quiet exists (the shared machine's
# convention: others pause heavy work meanwhile), after any other holder's
# quiet period ended; removes the file when the command ends, however it
# ends. The load average before and after goes to stderr.
#   docs/bench-results/consul/quiet.sh "what, for how long" command args...
set -euo pipefail
note=$1; shift
while [ -e /tmp/xdsbridge-quiet ]; do sleep 30; done
trap 'rm -f /tmp/xdsbridge-quiet' EXIT INT TERM
echo "$note (consul branch), from $(date -u +%H:%M) UTC" > /tmp/xdsbridge-quiet
echo "quiet from $(date -u +%FT%TZ); load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
rc=0
"$@" || rc=$?
echo "quiet until $(date -u +%FT%TZ); load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit $rc
