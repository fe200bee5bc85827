// Package report formats the benchmarks' figures the same way in every
// table: durations, sizes, ratios, CPU time, percentiles, and the median
// and range of repeated runs.
package report
