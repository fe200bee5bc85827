# Benchmark targets (issue 4), included by the Makefile.
# make bench       reduced S1 + S2 (about 5 minutes on 2 cores)
# make bench-full  every scenario S1..S6 at full size (long: tens of minutes)
# Output: out/bench/{results.md,results.csv,chart.svg,profiles/}.
BENCH_OUT ?= out/bench
BENCH_FLAGS ?=

.PHONY: bench bench-full

$(BENCH_OUT)/xdsload: FORCE
	@mkdir -p $(BENCH_OUT)
	go build -o $(BENCH_OUT)/xdsload ./cmd/xdsload

bench: $(BENCH_OUT)/xdsload
	$(BENCH_OUT)/xdsload bench --preset quick --out $(BENCH_OUT) $(BENCH_FLAGS)

bench-full: $(BENCH_OUT)/xdsload
	$(BENCH_OUT)/xdsload bench --preset full --out $(BENCH_OUT)/full $(BENCH_FLAGS)

FORCE:
