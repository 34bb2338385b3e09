package lock

import (
	"context"
	"slices"
)

func (l *locker) Inspect(ctx context.Context, key string, opts ...Option) (State, error) {
	if key == "" {
		return State{}, &ArgumentError{Name: "key", Reason: "must not be empty"}
	}
	if len(l.defaults) > 0 {
		opts = append(slices.Clip(l.defaults), opts...)
	}
	o, err := newOptions(opts)
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
