#!/usr/bin/env bash
# Ensures the real servers the integration tests run are available, and
# prints their paths as shell assignments:
#   XDSBRIDGE_CONSUL=/path/to/consul
#   XDSBRIDGE_COREDNS=/path/to/coredns
# A binary already on PATH is preferred; otherwise it is built once from the
# separate tools modules (tools/consul, tools/coredns), whose dependency
# graphs never enter the project's go.mod, and cached in
# ${XDSBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xdsbridge}/bin.
# A cold Consul build takes about 10 minutes on 2 cores, CoreDNS about 5.
# The status page test renders the admin page in a real headless Chromium:
# when none is on PATH and apt-get can install one (as root), it is
# installed from the distribution's packages (about a minute).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDSBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xdsbridge}
mkdir -p "$cache/bin"

# ensure NAME VERSION MODULE-DIR PACKAGE
ensure() {
	local name=$1 version=$2 dir=$3 pkg=$4
	local bin="$cache/bin/$name-$version"
	if command -v "$name" >/dev/null 2>&1; then
		bin=$(command -v "$name")
	elif [ ! -x "$bin" ]; then
		echo "building $name $version into $bin (cached for later runs)" >&2
		(cd "$here/$dir" && go build -trimpath -o "$bin.tmp" "$pkg") >&2
		mv "$bin.tmp" "$bin"
	fi
	echo "$bin"
}

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "installing chromium from the distribution's packages" >&2
		(apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium) >&2
	else
		echo "no chromium on PATH: install it (apt-get install chromium) for the status page test" >&2
	fi
fi

consul=$(ensure consul 1.14.11 tools/consul github.com/hashicorp/consul)
coredns=$(ensure coredns 1.15.0 tools/coredns github.com/coredns/coredns)
echo "XDSBRIDGE_CONSUL=$consul"
echo "XDSBRIDGE_COREDNS=$coredns"
