// Package otelconfig makes package config honour the otel and otel_keys
// settings, by wrapping the Locker that config.Open builds with package
// lockotel's instrumentation, and giving the Elector that config.NewElector
// builds its election hooks, with the global providers. Import it for its
// side effect:
//
//	import _ "github.com/locksmith-go/lock/config/otelconfig"
//
// A program that does not compiles none of OpenTelemetry, and config
// refuses otel=true with an error that names this import.
package otelconfig

import (
	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/elect"
	lockotel "github.com/locksmith-go/lock/otel"
)

// keys are the names of lockotel's key policies, as otel_keys gives them.
var keys = map[string]lockotel.KeyPolicy{
	"": lockotel.KeysOmitted, "omitted": lockotel.KeysOmitted, "hashed": lockotel.KeysHashed, "raw": lockotel.KeysRaw,
}

func init() {
	config.RegisterOTel(func(l *lock.Locker, policy string) *lock.Locker {
		return lockotel.NewLocker(l, lockotel.WithKeys(keys[policy]))
	})
	config.RegisterOTelElector(func(policy string) *elect.Hooks {
		return lockotel.ElectHooks(lockotel.WithKeys(keys[policy]))
	})
}
