//go:build !unix

package translate

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
