#!/usr/bin/env bash
# Ensures the real servers and tools the integration tests run are
# available, and prints their paths as shell assignments:
#   XDSBRIDGE_CONSUL=/path/to/consul
#   XDSBRIDGE_COREDNS=/path/to/coredns
#   XDSBRIDGE_ZOOKEEPER=/usr/share/java/zookeeper.jar
#   XDSBRIDGE_ETCD=/path/to/etcd
#   XDSBRIDGE_ISTIOD=/path/to/xdsbridge-istiod-HASH
#   XDSBRIDGE_PROMTOOL=/path/to/promtool
# A binary already on PATH is preferred; otherwise it is built once from the
# separate tools modules (tools/consul, tools/coredns, tools/etcd,
# tools/promtool), whose dependency graphs never enter the project's go.mod,
# and cached in ${XDSBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xdsbridge}/bin.
# A cold Consul build takes about 10 minutes on 2 cores, CoreDNS about 5,
# etcd about 2 (2 minutes of CPU; longer on a busy machine); promtool
# checks deploy/prometheus.
# The istiod of the Istio end-to-end tests is no upstream binary but a
# program of ours around istio's packages (tools/istiod), so it is never
# taken from PATH, and its cache name carries a hash of that module's
# sources (test/istiodtest computes the same): a change of it is built
# again. A cold build of it takes about 15 minutes on 2 cores.
# The status page test renders the admin page in a real headless Chromium,
# and the container image test (e2e/container) builds the Dockerfile with
# podman: when one is not on PATH and apt-get can install it (as root), it
# is installed from the distribution's packages (Chromium about a minute,
# podman about 30 seconds). The ZooKeeper source's tests run Debian's
# ZooKeeper server (the zookeeper package that zookeeperd runs as a
# service; the tests start their own) on a JRE: installed the same way
# (about 35 seconds), its jar printed as XDSBRIDGE_ZOOKEEPER.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDSBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xdsbridge}
mkdir -p "$cache/bin"

# build BIN MODULE-DIR PACKAGE [BUILD-TAGS]: builds PACKAGE of the module
# in MODULE-DIR into BIN unless it is there.
build() {
	local bin=$1 dir=$2 pkg=$3 tags=${4:-}
	if [ ! -x "$bin" ]; then
		echo "building $pkg into $bin (cached for later runs)" >&2
		(cd "$here/$dir" && go build -trimpath -tags "$tags" -o "$bin.tmp.$$" "$pkg") >&2
		mv "$bin.tmp.$$" "$bin"
	fi
	echo "$bin"
}

# ensure NAME VERSION MODULE-DIR PACKAGE [BUILD-TAGS]: NAME from PATH, else built.
ensure() {
	local name=$1 version=$2 dir=$3 pkg=$4 tags=${5:-}
	if command -v "$name" >/dev/null 2>&1; then
		command -v "$name"
	else
		build "$cache/bin/$name-$version" "$dir" "$pkg" "$tags"
	fi
}

# install PACKAGE FOR: installs a distribution package with apt-get when
# running as root, else says what to install and which test needs it.
updated=
install() {
	local pkg=$1 for=$2 # pkg may name several packages
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "installing $pkg from the distribution's packages" >&2
		if [ -z "$updated" ]; then apt-get update -qq >&2; updated=1; fi
		# shellcheck disable=SC2086 # several packages split on purpose
		apt-get install -y -qq --no-install-recommends $pkg >&2
	else
		echo "no $pkg on PATH: install it (apt-get install $pkg) for $for" >&2
	fi
}
# On a fresh machine the builds below are most of a cold `make test`: each
# spends part of its time downloading modules, type-checking along a long
# chain of packages or linking, on one CPU. They run at once so that one's
# waits overlap the others' compiling; the distribution's packages are
# installed beside them. Each job writes its result to a file of its own
# and prefixes its error output with its name. Each is a process group of
# its own (set -m), so that a script that ends early, by an error or an
# interrupt, stops the builds it started instead of leaving them compiling.
jobs=$(mktemp -d)
pids=()
names=()
stop_jobs() {
	for pid in "${pids[@]}"; do
		kill -- -"$pid" 2>/dev/null || true
	done
	rm -rf "$jobs"
}
trap stop_jobs EXIT
trap 'exit 130' INT TERM
set -m
spawn() { # spawn NAME COMMAND...: runs COMMAND in the background, its stdout in $jobs/NAME
	local name=$1
	shift
	# set +m inside: the job's own commands stay in its process group.
	(set +m; "$@") >"$jobs/$name" 2> >(sed "s/^/[$name] /" >&2) &
	pids+=($!)
	names+=("$name")
}
distribution() {
	if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
		install chromium "the status page test"
	fi
	command -v podman >/dev/null 2>&1 || install podman "the container image test"
	if [ ! -f "$zookeeper" ] || ! command -v java >/dev/null 2>&1; then
		install "zookeeper default-jre-headless" "the ZooKeeper source's tests"
	fi
}
zookeeper=${XDSBRIDGE_ZOOKEEPER:-/usr/share/java/zookeeper.jar}
istiod_hash=$(cd "$here/tools/istiod" && cat go.mod go.sum $(LC_ALL=C ls *.go) | sha256sum | cut -c1-12)
spawn distribution distribution
spawn consul ensure consul 1.14.11 tools/consul github.com/hashicorp/consul
spawn coredns ensure coredns 1.15.0 tools/coredns github.com/coredns/coredns
spawn etcd ensure etcd 3.7.3 tools/etcd go.etcd.io/etcd/server/v3
spawn istiod build "$cache/bin/xdsbridge-istiod-$istiod_hash" tools/istiod .
# promtool without the service discovery mechanisms the checked scrape
# configuration does not use (Prometheus' own build tags): a third fewer
# packages to compile.
spawn promtool ensure promtool 0.316.0 tools/promtool github.com/prometheus/prometheus/cmd/promtool remove_all_sd,enable_consul_sd
# The linters make test runs are built by `go tool` on first use and
# cached by Go; building them here overlaps that with the servers' builds.
spawn lint bash -c 'cd "$1"; go tool -modfile=tools/lint/go.mod golangci-lint version >&2; go tool -modfile=tools/lint/go.mod deadcode -h >/dev/null 2>&1; true' _ "$here"
failed=()
for i in "${!pids[@]}"; do
	wait "${pids[$i]}" || failed+=("${names[$i]}")
done
set +m
if [ "${#failed[@]}" -gt 0 ]; then
	echo "scripts/tools.sh: failed: ${failed[*]} (their output above is prefixed with their names)" >&2
	exit 1
fi
consul=$(cat "$jobs/consul")
coredns=$(cat "$jobs/coredns")
etcd=$(cat "$jobs/etcd")
istiod=$(cat "$jobs/istiod")
promtool=$(cat "$jobs/promtool")
echo "XDSBRIDGE_CONSUL=$consul"
echo "XDSBRIDGE_COREDNS=$coredns"
if [ -f "$zookeeper" ]; then echo "XDSBRIDGE_ZOOKEEPER=$zookeeper"; fi
echo "XDSBRIDGE_ETCD=$etcd"
echo "XDSBRIDGE_PROMTOOL=$promtool"
echo "XDSBRIDGE_ISTIOD=$istiod"
