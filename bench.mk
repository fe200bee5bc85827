# Benchmark targets, included by the Makefile. See docs/benchmarks.md.
#   make bench         reduced S1 + S2, all three servers side by side, and S1 for the floor
#                      (what gRPC alone costs: bench/xdsserver/floor.go) (~5 min on 2 cores)
#   make bench-full    every scenario S1..S7 at full size, 3 runs each, then bench-consul,
#                      bench-consul-scale and bench-file; prints its wall time (about 2 h 4 min
#                      on 2 cores). A run's sequential changes stop after 30 s (at least 5):
#                      the stock caches take up to 11 s a change at C=1,000 (SotW), and the
#                      per-change figures do not need 50 of them; BENCH_FULL_FLAGS= runs them all.
#   make bench-consul  end to end: real Consul agent -> bridge binary -> clients
#   make bench-consul-scale  the Consul source at 10,000 services, every kind of change
#   make bench-consul-refill a Consul agent restarted empty and refilled over 20 s and 60 s
#   make bench-faults  the bridge's CPU and its requests to a Consul agent that is killed, stopped or presents
#                      an untrusted certificate, and the time from a registration on the agent come back to a
#                      client holding it; 3 runs (~6 min)
#   make bench-memory  live heap across 10 rounds of 20,000 new service names, and RSS after 100,000 services
#                      shrunk to 6 against a bridge started with 6, 3 runs (~25 min)
#   make bench-edge    C=1,000 edge Envoys holding a listener, routes and a certificate beside 1,000
#                      clusters, against the same fleet on clusters and endpoints only: endpoint
#                      changes, route changes and certificate rotations, delta and SotW ADS, 3 runs (~20 min)
#   make bench-file    the file source end to end: bridge binary on a services file, one-line edits
#   make bench-zookeeper  the ZooKeeper source at 10,000 Curator instances in 1,000 services, 100 clients;
#                      3 runs (~2 min)
#   make bench-etcd    the etcd source at 10,000 gRPC naming instances in 1,000 services, 100 clients;
#                      3 runs (~1 min)
#   make bench-status-page  the admin status page at 10,000 services and 1,000 clients, in headless Chromium
#   make bench-headline  prints the headline table of docs/benchmarks.md and redraws its chart
#   make bench-istiod  the server CPU per change of serving istiod at 10,000 services × 3, one change/s for 60 s,
#                      each shape's server in its own process, 3 runs (~8 min)
#   make bench-istiod-consul  a real Consul agent's instance change timed to an istiod-like client (~4 min)
#   make bench-replicas  3 bridge replicas sharing 3,000 delta clients behind a TCP balancer, each on a
#                      Consul client agent of its own; one killed and restarted under churn (~20 min for its two variants)
# Output: out/bench/{results.md,results.csv,chart.svg,profiles/}
# (bench-full: out/bench/full/ and wall.txt there, bench-consul: out/bench/consul/,
# bench-consul-scale: out/bench/consul-scale/, bench-file: out/bench/file/,
# bench-zookeeper: out/bench/zookeeper/, bench-etcd: out/bench/etcd/,
# bench-status-page: out/bench/status-page/, bench-replicas: out/bench/replicas/).
BENCH_OUT   ?= out/bench
BENCH_FLAGS ?=
BENCH_FULL_FLAGS ?= --change-budget=30s

.PHONY: bench bench-edge bench-full bench-consul bench-consul-scale bench-consul-refill bench-faults bench-memory bench-file bench-zookeeper bench-etcd bench-status-page bench-headline bench-replicas bench-istiod bench-istiod-consul bench-bin

bench-bin:
	@mkdir -p $(BENCH_OUT)
	go build -o $(BENCH_OUT)/xdsload ./bench/cmd/xdsload

bench: bench-bin
	$(BENCH_OUT)/xdsload bench --preset quick --out $(BENCH_OUT) $(BENCH_FLAGS)

# A failed run is a result (on 2 CPUs the stock caches fall behind at 300
# changes/s and every server's fleet at 1,000/s); the report records it,
# so it does not stop the benchmarks after it. The target still fails at
# the end if anything did. A previous run's outputs are moved aside, not
# overwritten: they are two hours of work.
bench-full: bench-bin
	@if [ -e $(BENCH_OUT)/full ]; then mv $(BENCH_OUT)/full $(BENCH_OUT)/full.$$(date +%Y%m%dT%H%M%S); fi
	@mkdir -p $(BENCH_OUT)/full
	set -u; start=$$(date +%s); rc=0; \
	$(BENCH_OUT)/xdsload bench --preset full --runs 3 --timeout 2m --out $(BENCH_OUT)/full $(BENCH_FULL_FLAGS) $(BENCH_FLAGS) || rc=1; \
	$(MAKE) bench-consul bench-consul-scale bench-file || rc=1; \
	echo "make bench-full: $$(( $$(date +%s) - start )) s of wall time on $$(nproc) CPUs (exit status $$rc)" | tee $(BENCH_OUT)/full/wall.txt; \
	exit $$rc

bench-consul: bench-bin
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	set -eu; vars=$$(scripts/tools.sh); eval "$$vars"; \
	for mode in sotw delta; do \
	  flag=; [ $$mode = sotw ] || flag=--delta; \
	  $(BENCH_OUT)/xdsload consul --consul "$$XDSBRIDGE_CONSUL" --bridge $(BENCH_OUT)/bridge \
	    -c 200 -n 200 --changes 30 $$flag --out $(BENCH_OUT)/consul/$$mode; \
	done

# The Consul source at 10,000 services: a server agent and a client agent,
# the bridge on the client's HTTPS listener with default settings (a watch
# per service, 200 per HTTP/2 connection), every kind of registry change.
bench-consul-scale: bench-bin
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	set -eu; vars=$$(scripts/tools.sh); eval "$$vars"; \
	$(BENCH_OUT)/xdsload consul-events --consul "$$XDSBRIDGE_CONSUL" --bridge $(BENCH_OUT)/bridge \
	  --topology cluster --tls -n 10000 --per-event 10 --out $(BENCH_OUT)/consul-scale

# A -dev agent restarted on an empty data directory, 180 of its 200
# services registered again over 20 s, then over 60 s: the endpoints the
# clients were ever without (the promise is none) and when the 20 that
# never came back were removed. The bridge runs with default settings.
bench-consul-refill: bench-bin
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	set -eu; vars=$$(scripts/tools.sh); eval "$$vars"; \
	for refill in 20s 60s; do \
	  $(BENCH_OUT)/xdsload consul-refill --consul "$$XDSBRIDGE_CONSUL" --bridge $(BENCH_OUT)/bridge \
	    --refill $$refill --out $(BENCH_OUT)/consul-refill/$$refill; \
	done

# The harness lives in bench/faults (go doc ./bench/faults); its raw results
# go to $(BENCH_OUT)/faults, to be committed under docs/bench-results/faults.
bench-faults:
	@mkdir -p $(BENCH_OUT)
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	set -eu; vars=$$(scripts/tools.sh); eval "$$vars"; \
	go run ./bench/faults --bridge $(BENCH_OUT)/bridge --consul "$$XDSBRIDGE_CONSUL" --runs 3 --out $(BENCH_OUT)/faults

# The program lives in bench/edge (go doc ./bench/edge); its raw results
# go to $(BENCH_OUT)/edge/{delta,sotw}, to be committed under
# docs/bench-results/edge.
bench-edge:
	@mkdir -p $(BENCH_OUT)
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	go run ./bench/edge --bridge $(BENCH_OUT)/bridge --runs 3 --out $(BENCH_OUT)/edge/delta
	go run ./bench/edge --bridge $(BENCH_OUT)/bridge --runs 3 --sotw --out $(BENCH_OUT)/edge/sotw

# The program lives in bench/memory (go doc ./bench/memory); its raw results
# go to $(BENCH_OUT)/memory, to be committed under docs/bench-results/memory.
bench-memory:
	@mkdir -p $(BENCH_OUT)
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	go run ./bench/memory --bridge $(BENCH_OUT)/bridge --runs 3 --out $(BENCH_OUT)/memory

bench-file: bench-bin
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	$(BENCH_OUT)/xdsload file-source --bridge $(BENCH_OUT)/bridge -n 1000,10000,100000 \
	  --formats yaml,json --edits 5 --out $(BENCH_OUT)/file

# The registry sources at scale: a real server started by the harness (go
# doc ./bench/zookeeper, ./bench/etcd), the bridge and its 100 clients in
# the harness's process. Each prints its medians and writes runs.json and
# summary.txt, to be committed under docs/bench-results/<registry>.
bench-zookeeper:
	@mkdir -p $(BENCH_OUT)
	set -eu; vars=$$(scripts/tools.sh); eval "$$vars"; export XDSBRIDGE_ZOOKEEPER XDSBRIDGE_INTEGRATION=required; \
	XDSBRIDGE_BENCH=zookeeper go test -count=1 -run '^TestScale$$' -timeout 30m ./bench/zookeeper/ \
	  -args -runs 3 -out $(abspath $(BENCH_OUT))/zookeeper
	@cat $(BENCH_OUT)/zookeeper/summary.txt

bench-etcd:
	@mkdir -p $(BENCH_OUT)
	set -eu; vars=$$(scripts/tools.sh); eval "$$vars"; export XDSBRIDGE_ETCD XDSBRIDGE_INTEGRATION=required; \
	XDSBRIDGE_BENCH=etcd go test -count=1 -run '^TestScale$$' -timeout 30m ./bench/etcd/ \
	  -args -runs 3 -out $(abspath $(BENCH_OUT))/etcd
	@cat $(BENCH_OUT)/etcd/summary.txt

# STATUS_BRIDGES=old=path/to/old,new=$(BENCH_OUT)/bridge compares builds.
STATUS_BRIDGES ?= $(BENCH_OUT)/bridge
bench-status-page: bench-bin
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	$(BENCH_OUT)/xdsload status-page --bridge $(STATUS_BRIDGES) -n 10000 -c 1000 --runs 5 \
	  --paths '/,/?only=problems,/?q=svc-04&page=3' --out $(BENCH_OUT)/status-page

# The headline table and chart of docs/benchmarks.md, from committed raw
# results (a suite's log or results CSVs; the first file that ran a row's
# configuration gives the whole row).
HEADLINE_RESULTS ?= docs/bench-results/fanout/hold1/s7-c10000/results.csv \
	docs/bench-results/fanout/hold8/s7-c19900-keepalive10m/results.csv \
	docs/bench-results/full/xdsload.log
bench-headline: bench-bin
	$(BENCH_OUT)/xdsload headline --svg docs/benchmarks-headline.svg $(HEADLINE_RESULTS)

# Replicas that share one fleet: a Consul server agent and a client agent
# per replica, 1,000 services, 3,000 delta clients behind xdsload's TCP
# balancer, churn at 5 changes/s, replica-0 killed (SIGKILL) and
# restarted; once with the default max_connection_age and once with 1m.
bench-replicas: bench-bin
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	set -eu; vars=$$(scripts/tools.sh); eval "$$vars"; \
	$(BENCH_OUT)/xdsload replicas --consul "$$XDSBRIDGE_CONSUL" --bridge $(BENCH_OUT)/bridge \
	  --out $(BENCH_OUT)/replicas $(BENCH_FLAGS)

# Serving istiod: each shape's server (the engine with the Istio
# collections, xdsload serve --impl istio-*) in its own process, its CPU
# apart from the istiod-like client's.
bench-istiod: bench-bin
	$(BENCH_OUT)/xdsload istiod -n 10000 -e 3 --rate 1 --duration 60s --idle 10s --runs 3 --out $(BENCH_OUT)/istiod

# An instance registered and deregistered in a real Consul agent, timed to
# an istiod-like client: a server and a client agent, the bridge on the
# client's HTTPS listener at default settings.
bench-istiod-consul: bench-bin
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	set -eu; vars=$$(scripts/tools.sh); eval "$$vars"; \
	for shape in inline workload_entries; do \
	  $(BENCH_OUT)/xdsload istiod-consul --consul "$$XDSBRIDGE_CONSUL" --bridge $(BENCH_OUT)/bridge \
	    --topology cluster --tls -n 1000 --changes 40 --shape $$shape --out $(BENCH_OUT)/istiod-consul/$$shape; \
	done; \
	$(BENCH_OUT)/xdsload istiod-consul --consul "$$XDSBRIDGE_CONSUL" --bridge $(BENCH_OUT)/bridge \
	  --topology cluster --tls -n 10000 --changes 40 --timeout 5m --shape inline --out $(BENCH_OUT)/istiod-consul/inline-10000
