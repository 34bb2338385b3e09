package setnxgetset

import (
	"context"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/notify"
	"github.com/locksmith-go/lock/internal/scan"
	"github.com/locksmith-go/lock/strategy"
)

// Inspect implements [strategy.Strategy]. It reads the key's value and its
// TTL in one script (without scripts, one MULTI … EXEC). For a timestamp of the Format, it sets Expiry, the
// decoded timestamp, and Takeover, whether Obtain would take the lock over
// now (the timestamp is more than the clock skew in the past, by this
// client's clock); Fingerprint is that of the whole value, which is the
// holder's Lock.Token. TTL is the key's own (the safety TTL), negative
// when it has none, as legacy clients write it. Another value is held by a
// non-legacy owner and never taken over; its Fingerprint and Metadata are
// read as the other strategies read theirs ([strategy.SplitValue]).
func (s *legacy) Inspect(ctx context.Context, key string) (strategy.State, error) {
	st, _, err := s.inspect(ctx, key)
	return st, err
}

// Break implements [strategy.Breaker]: it reads the lock as Inspect does,
// and deletes the value it read with a compare-and-delete, publishing the
// release as Release does. Legacy clients' locks can be broken so too.
// It leaves no mark: a timestamp is not unique to a holder, so the broken
// holder reports strategy.ErrExpired, not ErrBroken.
func (s *legacy) Break(ctx context.Context, key, fingerprint string) (strategy.State, error) {
	read := func(ctx context.Context) (strategy.State, cas.Reading, error) { return s.inspect(ctx, key) }
	return cas.Break(ctx, nil, key, fingerprint, read, func(ctx context.Context, value string) error {
		return notify.DeleteWaking(ctx, s.srv, s.conn, key, value)
	})
}

func (s *legacy) inspect(ctx context.Context, key string) (strategy.State, cas.Reading, error) {
	r, err := s.srv.Inspect(ctx, key, "", cas.Queue{})
	if err != nil {
		return strategy.State{}, r, err
	}
	return s.state(r), r, nil
}

// state is the State of a reading.
func (s *legacy) state(r cas.Reading) strategy.State {
	if !r.Exists {
		return strategy.State{Verdict: "free"}
	}
	st := strategy.State{Held: true, TTL: r.TTL}
	expiry, ok := s.format.Decode(r.Value)
	if !ok {
		st.Fingerprint, st.Metadata = r.Holder()
		st.Verdict = "held by a non-legacy owner: never taken over"
		return st
	}
	st.Fingerprint, st.Expiry, st.Takeover = strategy.Fingerprint(r.Value), expiry, s.expired(r.Value)
	switch {
	case st.Takeover:
		st.Verdict = "expired: Obtain takes it over"
	case s.now().Before(expiry):
		st.Verdict = "held"
	default:
		st.Verdict = "held: expired, but within the clock skew"
	}
	return st
}

var _ strategy.Lister = (*legacy)(nil)

// List implements [strategy.Lister]: it SCANs the server, or every master
// of a Cluster in turn. The legacy locks keep no other keys.
func (s *legacy) List(ctx context.Context, prefix string, count int, yield func(key string) bool) error {
	return scan.Prefix(ctx, s.conn, prefix, count, yield)
}
