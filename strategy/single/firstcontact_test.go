package single_test

import (
	"context"
	"testing"
	"time"

	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestFirstContact: over every driver, on a server that runs scripts, a
// Locker's first Obtain starts with the acquire script, which a server
// that refuses scripts would refuse before writing anything (see
// cas.Detecting), and its next Obtain with the bare SET NX, sending no
// script: the steady state costs what it did.
func TestFirstContact(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	scripts := func(t *testing.T, obtain func()) []string {
		t.Helper()
		if _, err := srv.Command(ctx, "CONFIG", "RESETSTAT"); err != nil {
			t.Fatal(err)
		}
		obtain()
		ran, err := srv.Scripts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ran
	}
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			l, err := single.New(d.Conn(t, srv.Addr))
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{true, false} {
				ran := scripts(t, func() {
					lk, err := l.Obtain(ctx, conformance.Key(t), time.Minute)
					if err != nil {
						t.Fatalf("Obtain %d = %v, want a lock", i+1, err)
					}
					t.Cleanup(func() { _ = lk.Release(ctx) })
				})
				if got := len(ran) > 0; got != want {
					t.Errorf("Obtain %d: the server ran scripts %v; want a script: %v", i+1, ran, want)
				}
			}
		})
	}
}
