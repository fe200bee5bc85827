package main

// runHelp is `bridge run --help`: what an operator needs to run the bridge
// under a supervisor without reading the README.
const runHelp = `Run serves the registries of the configuration FILE (or --config FILE) to
Envoy and proxyless gRPC clients over xDS, with the admin HTTP API beside
it, until it is stopped.

Signals:
  SIGHUP            re-read FILE (as POST /-/reload on the admin listener
                    does, and with reload.watch_config a change of FILE):
                    a changed source's new instance takes over once it has
                    synced, the others keep running; an invalid file is
                    logged and counted, and the running configuration stays
  SIGINT, SIGTERM   stop: no new streams, open ones get 3s, then exit 0

Environment:
  BRIDGE_<KEY>      overrides a scalar key of FILE: the key in capitals with _
                    for each dot, e.g. BRIDGE_XDS_LISTEN, BRIDGE_ADMIN_LISTEN,
                    BRIDGE_LOG_LEVEL, BRIDGE_ADMIN_TOKEN_FILE; the flags
                    below override both
  GOMEMLIMIT        set it to about 80% of the container's memory limit

Exit codes:
  0   stopped by SIGINT or SIGTERM
  1   runtime failure (a listener could not bind or failed)
  2   invalid configuration or command line`
