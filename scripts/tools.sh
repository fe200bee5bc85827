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
		(cd "$here/$dir" && go build -trimpath -tags "$tags" -o "$bin.tmp" "$pkg") >&2
		mv "$bin.tmp" "$bin"
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
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
	install chromium "the status page test"
fi
command -v podman >/dev/null 2>&1 || install podman "the container image test"
zookeeper=${XDSBRIDGE_ZOOKEEPER:-/usr/share/java/zookeeper.jar}
if [ ! -f "$zookeeper" ] || ! command -v java >/dev/null 2>&1; then
	install "zookeeper default-jre-headless" "the ZooKeeper source's tests"
fi

consul=$(ensure consul 1.14.11 tools/consul github.com/hashicorp/consul)
coredns=$(ensure coredns 1.15.0 tools/coredns github.com/coredns/coredns)
etcd=$(ensure etcd 3.7.3 tools/etcd go.etcd.io/etcd/server/v3)
istiod_hash=$(cd "$here/tools/istiod" && cat go.mod go.sum $(LC_ALL=C ls *.go) | sha256sum | cut -c1-12)
istiod=$(build "$cache/bin/xdsbridge-istiod-$istiod_hash" tools/istiod .)
# promtool without the service discovery mechanisms the checked scrape
# configuration does not use (Prometheus' own build tags): a third fewer
# packages to compile.
promtool=$(ensure promtool 0.316.0 tools/promtool github.com/prometheus/prometheus/cmd/promtool remove_all_sd,enable_consul_sd)
echo "XDSBRIDGE_CONSUL=$consul"
echo "XDSBRIDGE_COREDNS=$coredns"
if [ -f "$zookeeper" ]; then echo "XDSBRIDGE_ZOOKEEPER=$zookeeper"; fi
echo "XDSBRIDGE_ETCD=$etcd"
echo "XDSBRIDGE_PROMTOOL=$promtool"
echo "XDSBRIDGE_ISTIOD=$istiod"
