#!/bin/sh
# Interleaved runs of the engine's benchmarks, before and after: the test
# binaries of main (before.test) and of the branch (after.test), built
# with `go test -c ./xds/`, one count each in turn, so that the load of a
# shared machine falls on both alike. Usage: pair.sh DIR COUNT PATTERN
dir=$1 count=${2:-6} pattern=${3:-'Apply$|Reconnect'}
cd "$dir" || exit 1
i=0
while [ "$i" -lt "$count" ]; do
	for b in before after; do
		./$b.test -test.run '^$' -test.bench "$pattern" -test.count 1 >>"$b.txt" 2>&1
	done
	i=$((i + 1))
done
