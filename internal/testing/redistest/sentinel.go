package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MasterName is the name under which the Sentinels of [StartSentinel] and
// [StartSentinels] monitor their master.
const MasterName = "locksmith"

// StartSentinel starts a Sentinel that monitors master as [MasterName], and
// stops it when t ends.
func StartSentinel(t testing.TB, master *Server) *Server {
	t.Helper()
	return startSentinel(t, master, "sentinel monitor %s 127.0.0.1 %d 1\n")
}

// StartSentinels starts n Sentinels that monitor master as [MasterName]
// with a quorum of a majority, take it for down after 1s without an answer
// and fail over within 5s, and stops them when t ends. It returns once each
// knows the others and master's replicas, so that a failover can start.
func StartSentinels(t testing.TB, master *Server, n int) []*Server {
	t.Helper()
	conf := "sentinel monitor %s 127.0.0.1 %d " + strconv.Itoa(n/2+1) + "\n" +
		"sentinel down-after-milliseconds " + MasterName + " 1000\n" +
		"sentinel failover-timeout " + MasterName + " 5000\n"
	replicas := strings.Count(master.do(t, "INFO", "replication"), "state=online")
	sentinels := make([]*Server, n)
	for i := range sentinels {
		sentinels[i] = startSentinel(t, master, conf)
	}
	for _, s := range sentinels {
		Eventually(t, fmt.Sprintf("sentinel %s knows %d other sentinels and %d replicas", s.Addr, n-1, replicas), func(ctx context.Context) bool {
			others, err := s.Command(ctx, "SENTINEL", "SENTINELS", MasterName)
			if err != nil || strings.Count(others, "runid") != n-1 {
				return false
			}
			reps, err := s.Command(ctx, "SENTINEL", "REPLICAS", MasterName)
			return err == nil && strings.Count(reps, "flags slave ") == replicas
		})
	}
	return sentinels
}

// startSentinel starts a Sentinel with the configuration monitor, a format
// of MasterName and master's port, and stops it when t ends.
func startSentinel(t testing.TB, master *Server, monitor string) *Server {
	t.Helper()
	return startWith(t, "redis-sentinel", func(s *Server) []string {
		conf := filepath.Join(s.dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n", s.Port, s.dir, filepath.Join(s.dir, "redis.log")) +
			fmt.Sprintf(monitor, MasterName, master.Port)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatalf("write sentinel.conf: %v", err)
		}
		return []string{conf, "--sentinel"}
	})
}

// StartReplica starts a server that replicates master, and stops it when t
// ends. It returns once master counts it as an online replica.
func StartReplica(t testing.TB, master string) *Server {
	t.Helper()
	host, port, _ := strings.Cut(master, ":")
	noSyncDelay(t, &Server{Addr: master})
	r := Start(t, 1, "--replicaof", host, port)[0]
	WaitReplicas(t, master, 1)
	return r
}

// WaitReplicas waits until the server at addr counts n online replicas.
func WaitReplicas(t testing.TB, addr string, n int) {
	t.Helper()
	s := &Server{Addr: addr}
	Eventually(t, fmt.Sprintf("%s has %d online replicas", addr, n), func(ctx context.Context) bool {
		text, err := s.Command(ctx, "INFO", "replication")
		return err == nil && strings.Count(text, "state=online") == n
	})
}

// WaitFailover waits until sentinel names a master other than old, and that
// master says it is one, and returns its address.
func WaitFailover(t testing.TB, sentinel *Server, old string) string {
	t.Helper()
	var addr string
	Eventually(t, "a failover away from "+old, func(ctx context.Context) bool {
		reply, err := sentinel.Command(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName)
		host, port, _ := strings.Cut(reply, " ")
		if err != nil || reply == "" || host+":"+port == old {
			return false
		}
		addr = host + ":" + port
		role, err := (&Server{Addr: addr}).Command(ctx, "ROLE")
		return err == nil && strings.HasPrefix(role, "master")
	})
	return addr
}

// Eventually checks ok every 50ms until it holds, and fails t if it has not
// within a minute: a hang detector, not a timing assertion.
func Eventually(t testing.TB, what string, ok func(ctx context.Context) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := ok(ctx)
		cancel()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// noSyncDelay has master start a replica's full sync at once, not after 5s
// (repl-diskless-sync-delay) of waiting for more replicas.
func noSyncDelay(t testing.TB, master *Server) {
	t.Helper()
	master.do(t, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
}
