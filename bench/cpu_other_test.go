//go:build !unix

package bench

import "time"

// processCPU returns 0: the CPU time is not measured on this system.
func processCPU() time.Duration { return 0 }
