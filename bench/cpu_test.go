package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// cpuMeter measures the CPU time that a benchmark costs: in this process
// (the clients, the libraries, the runtime), and in the redis-server
// processes, by their INFO CPU. On a machine with few cores, a contender
// that needs more CPU per operation cannot be fast however well it
// overlaps its round trips.
type cpuMeter struct {
	servers []*redis.Client
	self    time.Duration
	server  time.Duration
}

// meterCPU starts measuring; servers are the servers the contender uses.
func meterCPU(servers []*redis.Client) cpuMeter {
	return cpuMeter{servers: servers, self: processCPU(), server: serverCPU(servers)}
}

// report records the CPU time per operation since meterCPU.
func (m cpuMeter) report(b *testing.B) {
	self, server := processCPU()-m.self, serverCPU(m.servers)-m.server
	if self > 0 {
		b.ReportMetric(micros(self)/float64(b.N), "client-cpu-us/op")
	}
	if server > 0 {
		b.ReportMetric(micros(server)/float64(b.N), "server-cpu-us/op")
	}
}

// serverCPU returns the CPU time the servers have used, by their INFO
// CPU (used_cpu_sys and used_cpu_user, in seconds), or 0 if one of them
// did not say.
func serverCPU(servers []*redis.Client) time.Duration {
	var total time.Duration
	for _, s := range servers {
		info, err := s.Info(context.Background(), "cpu").Result()
		if err != nil {
			return 0
		}
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k == "used_cpu_sys" || k == "used_cpu_user" {
				secs, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0
				}
				total += time.Duration(secs * float64(time.Second))
			}
		}
	}
	return total
}
