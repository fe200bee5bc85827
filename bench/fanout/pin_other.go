//go:build !linux

package fanout

// SplitCPUs reports no split where affinity is not set here: the server
// and the load generator share the CPUs.
func SplitCPUs() (server, fleet []int, ok bool) { return nil, nil, false }

// PinSelf does nothing where affinity is not set here.
func PinSelf([]int) error { return nil }

// CPUList is unused where affinity is not set here.
func CPUList([]int) string { return "" }
