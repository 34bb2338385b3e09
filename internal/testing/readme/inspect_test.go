package readme

import (
	"context"
	"fmt"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// Inspect is docs/locking.md's "Inspecting a lock".
func Inspect(ctx context.Context, locker *lock.Locker, lk *lock.Lock) error {
	st, err := locker.Inspect(ctx, "invoice:42")
	if err != nil {
		return err // Redlock: a *redlock.QuorumError when too few nodes answered; st.Nodes says what each did
	}
	fmt.Println(st.Verdict, st.TTL, st.Metadata) // held 29.8s host=web-3
	if st.Fingerprint == strategy.Fingerprint(lk.Token()) {
		fmt.Println("held by lk")
	}
	return nil
}
