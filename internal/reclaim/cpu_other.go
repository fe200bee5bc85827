//go:build !unix

package reclaim

import "time"

// processCPU is zero where the process's CPU time is not read: the
// policy then decides on allocation alone.
func processCPU() time.Duration { return 0 }
