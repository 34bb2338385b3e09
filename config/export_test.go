package config

import "github.com/locksmith-go/lock/elect"

// SetOTelElector installs hooks as the registered election instrumentation
// (nil: none) until the returned function restores what was there, for the
// tests of NewElector's otel: RegisterOTelElector can be called once only.
func SetOTelElector(hooks func(keys string) *elect.Hooks) (restore func()) {
	otelElector.Lock()
	defer otelElector.Unlock()
	was := otelElector.hooks
	otelElector.hooks = hooks
	return func() {
		otelElector.Lock()
		defer otelElector.Unlock()
		otelElector.hooks = was
	}
}
