package harness

import (
	"context"
	"net"
	"path/filepath"
	"runtime"
)

// Listen announces on the node's network namespace: the listener's socket
// is made there, by a thread that enters it, as DialContext's is, and its
// connections come over the node's link, whatever goroutine accepts them.
func (node *Node) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	type listened struct {
		l   net.Listener
		err error
	}
	done := make(chan listened, 1)
	go func() {
		// As in DialContext, the thread never leaves the namespace: Go
		// ends it with its goroutine.
		runtime.LockOSThread()
		if err := enter(filepath.Join(nsRun, node.ns)); err != nil {
			done <- listened{nil, err}
			return
		}
		l, err := (&net.ListenConfig{}).Listen(ctx, network, addr)
		done <- listened{l, err}
	}()
	l := <-done
	return l.l, l.err
}
