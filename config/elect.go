package config

import (
	"sync"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/elect"
)

// NewElector returns an Elector for key over l (see elect.New) with c's
// settings of the Elector: lease, stop_grace, interval and identity, each
// where it is set, then opts, which override them. l is the Locker that
// Open built from c, shared with the program's locks: the Elector owns no
// client, and l's Close ends its campaigns.
//
// It checks c as Validate does first, so that an invalid setting is named
// as the configuration names it (stop_grace, not elect's "stop grace").
// A Locker whose strategy numbers no terms (redlock, setnx-getset) gets
// elect.New's error: an *lock.ArgumentError named "locker" that matches
// errors.ErrUnsupported. Nothing is sent.
//
// With otel set, the Elector gets the election instrumentation that
// [RegisterOTelElector] registered, outermost, before opts' hooks; without
// one (config/otelconfig registers none until package lockotel offers
// election hooks), it gets none. The Locker's own instrumentation, Open's
// with otel, sees the Elector's locks either way.
//
// Defaults leaves these settings unset, so that an opts' elect.WithLease
// still derives the stop grace and interval from its own lease; the
// Elector's Lease and StopGrace say what it runs with.
func NewElector(l *lock.Locker, c Config, key string, opts ...elect.Option) (*elect.Elector, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return elect.New(l, key, append(c.electOptions(), opts...)...)
}

// electOptions returns the options of the Elector that c describes: those
// of its set settings, after the instrumentation of otel.
func (c Config) electOptions() []elect.Option {
	var opts []elect.Option
	if hooks := otelElectorOf(); c.OTel && hooks != nil {
		opts = append(opts, elect.WithHooks(hooks(c.OTelKeys)))
	}
	if c.Lease != 0 {
		opts = append(opts, elect.WithLease(c.Lease))
	}
	if c.StopGrace != 0 {
		opts = append(opts, elect.WithStopGrace(c.StopGrace))
	}
	if c.Interval != 0 {
		opts = append(opts, elect.WithInterval(c.Interval))
	}
	if c.Identity != "" {
		opts = append(opts, elect.WithIdentity(c.Identity))
	}
	return opts
}

// The election instrumentation that the otel setting turns on in
// NewElector, which package config/otelconfig is to register.
var otelElector struct {
	sync.RWMutex
	hooks func(keys string) *elect.Hooks
}

// RegisterOTelElector makes [NewElector] honour the otel and otel_keys
// settings with hooks, which returns an Elector's instrumentation with
// keys recorded as otel_keys says (omitted, hashed or raw; "" is the
// default), as [RegisterOTel] does for Open. Package
// github.com/locksmith-go/lock/config/otelconfig is where it belongs, once
// package lockotel offers election hooks. It panics if called twice, or
// with nil.
func RegisterOTelElector(hooks func(keys string) *elect.Hooks) {
	otelElector.Lock()
	defer otelElector.Unlock()
	if otelElector.hooks != nil || hooks == nil {
		panic("config: RegisterOTelElector called twice, or with nil")
	}
	otelElector.hooks = hooks
}

// otelElectorOf returns the registered election instrumentation, or nil.
func otelElectorOf() func(keys string) *elect.Hooks {
	otelElector.RLock()
	defer otelElector.RUnlock()
	return otelElector.hooks
}
