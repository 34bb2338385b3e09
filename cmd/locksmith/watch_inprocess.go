package main

import (
	"io"
	"os/exec"
	"sync"
	"time"
)

// startInProcess starts the command argv, with env and the streams given,
// in a process group of its own, under a goroutine of locksmith's that
// enforces its kill schedule: the schedule of the Linux watchdog, in
// process, the guard of elect's command where there is no watchdog (see
// watch_other.go).
func startInProcess(argv, env []string, stdin io.Reader, stdout, stderr io.Writer, d time.Time, grace time.Duration) (*guard, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	reports := make(chan watchReport, 16)
	c, err := startChild(cmd)
	if err != nil {
		reports <- startFailed(argv[0], err)
		close(reports)
		return &guard{reports: reports, send: func(order) {}, close: func() {}}, nil
	}
	reports <- watchReport{kind: reportStarted, pid: c.pid}
	orders, done := make(chan order), make(chan struct{})
	// The schedule never waits for locksmith to read a report, which may
	// be sending it an order: the reports queue up.
	var (
		mu     sync.Mutex
		queue  []watchReport
		ended  bool
		queued = make(chan struct{}, 1)
	)
	tell := func(r watchReport) {
		mu.Lock()
		queue = append(queue, r)
		mu.Unlock()
		select {
		case queued <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(reports)
		for {
			<-queued
			mu.Lock()
			q, end := queue, ended
			queue = nil
			mu.Unlock()
			for _, r := range q {
				reports <- r
			}
			if end {
				return
			}
		}
	}()
	go func() {
		defer close(done)
		schedule(c, mono(d), grace, killMargin, orders, tell)
		mu.Lock()
		ended = true
		mu.Unlock()
		select { // the queue's last wake-up
		case queued <- struct{}{}:
		default:
		}
	}()
	return &guard{
		reports: reports,
		send: func(o order) {
			select {
			case orders <- o:
			case <-done:
			}
		},
		close: func() { <-done },
	}, nil
}
