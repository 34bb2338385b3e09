package lock

import "context"

// Inspect reads the lock through the strategy, within the Op hooks.
func (l *locker) Inspect(ctx context.Context, key string, opts ...Option) (State, error) {
	if err := checkKey(key); err != nil {
		return State{}, err
	}
	o, err := l.options(opts)
	if err != nil {
		return State{}, err
	}
	var st State
	read := func(ctx context.Context) (err error) {
		st, err = l.s.Inspect(ctx, key)
		return err
	}
	if len(o.hooks) == 0 {
		err = read(ctx)
	} else {
		err = o.hooks.wrap(ctx, l.s, o.hooks.event(l.s, "inspect", key), opHook, read)
	}
	if err != nil {
		return st, opError("inspect", key, err)
	}
	return st, nil
}
