package lock

import "context"

func (l *locker) Inspect(ctx context.Context, key string) (State, error) {
	if key == "" {
		return State{}, &ArgumentError{Name: "key", Reason: "must not be empty"}
	}
	st, err := l.s.Inspect(ctx, key)
	if err != nil {
		return st, opError("inspect", key, err)
	}
	return st, nil
}
