package lockotel_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/locksmith-go/lock/strategy"
)

// TestCleanupSpan: a clean-up that gave up, after an Obtain whose attempt
// got no answer, is recorded as a lock.cleanup span with an error status,
// although it ends after the Obtain returned and concerns no lock.
func TestCleanupSpan(t *testing.T) {
	t.Parallel() // it waits for the clean-up to give up, CleanupTimeout
	r := newRecording(t)
	l := r.wrap(singleLocker(t, silent(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := l.Obtain(ctx, "k", time.Minute); err == nil {
		t.Fatal("Obtain from a closed port = nil, want an error")
	}
	end := time.Now().Add(strategy.CleanupTimeout + 10*time.Second)
	for len(r.ended("lock.cleanup")) == 0 && time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
	}
	s := only(t, r.ended("lock.cleanup"), "lock.cleanup")
	if s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, "cleanup") {
		t.Errorf("lock.cleanup status = %v %q, want Error, describing the clean-up", s.Status().Code, s.Status().Description)
	}
	t.Logf("lock.cleanup lasted %v: %q", s.EndTime().Sub(s.StartTime()).Round(time.Millisecond), s.Status().Description)
}

// silent returns the address of a server that accepts connections and reads
// what it is sent, but never answers: every command to it times out.
func silent(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // until the client closes the connection
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().String()
}
