# Benchmark targets (issue 4), included by the Makefile. See docs/benchmarks.md.
#   make bench         reduced S1 + S2, all three servers side by side (~5 min on 2 cores)
#   make bench-full    every scenario S1..S6 at full size, then bench-consul (long)
#   make bench-consul  end to end: real Consul agent -> bridge binary -> clients
#   make bench-file    the file source end to end: bridge binary on a services file, one-line edits
# Output: out/bench/{results.md,results.csv,chart.svg,profiles/}
# (bench-full: out/bench/full/, bench-consul: out/bench/consul/, bench-file: out/bench/file/).
BENCH_OUT   ?= out/bench
BENCH_FLAGS ?=

.PHONY: bench bench-full bench-consul bench-file bench-bin

bench-bin:
	@mkdir -p $(BENCH_OUT)
	go build -o $(BENCH_OUT)/xdsload ./cmd/xdsload

bench: bench-bin
	$(BENCH_OUT)/xdsload bench --preset quick --out $(BENCH_OUT) $(BENCH_FLAGS)

bench-full: bench-bin
	$(BENCH_OUT)/xdsload bench --preset full --out $(BENCH_OUT)/full $(BENCH_FLAGS)
	$(MAKE) bench-consul
	$(MAKE) bench-file

bench-consul: bench-bin
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	set -eu; vars=$$(scripts/tools.sh); eval "$$vars"; \
	for mode in "" --delta; do \
	  $(BENCH_OUT)/xdsload consul --consul "$$XDSBRIDGE_CONSUL" --bridge $(BENCH_OUT)/bridge \
	    -c 200 -n 200 --changes 30 $$mode --out $(BENCH_OUT)/consul/$${mode:-sotw}; \
	done

bench-file: bench-bin
	go build -o $(BENCH_OUT)/bridge ./cmd/bridge
	$(BENCH_OUT)/xdsload file-source --bridge $(BENCH_OUT)/bridge -n 1000,10000,100000 \
	  --formats yaml,json --edits 5 --out $(BENCH_OUT)/file
