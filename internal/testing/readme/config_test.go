package readme

import (
	"github.com/locksmith-go/lock/config"
	_ "github.com/locksmith-go/lock/config/redigoconfig" // driver=redigo
)

import (
	"context"

	"github.com/locksmith-go/lock/elect"
)

// Config is docs/config.md's first fragment.
func Config(ctx context.Context) error {
	cfg, err := config.ParseURL("redlock://h1:6379,h2:6379,h3:6379/0?driver=redigo&ttl=30s")
	// or: cfg, err := config.FromEnv("LOCKSMITH_")
	// or: err := json.Unmarshal(data, &cfg)
	if err != nil {
		return err // an *lock.ArgumentError that names the setting
	}
	locker, err := config.Open(cfg) // the one entry point
	if err != nil {
		return err
	}
	defer locker.Close() // closes every client Open opened

	lk, err := locker.Obtain(ctx, "report:daily", 0) // 0: the configured TTL
	if err != nil {
		return err
	}
	return lk.Release(ctx)
}

// Elector is docs/config.md's fragment of "An Elector from the
// configuration".
func Elector(ctx context.Context) error {
	cfg, err := config.FromEnv("LOCKSMITH_") // LOCKSMITH_URL=single://10.0.0.1:6379, LOCKSMITH_LEASE=10s, LOCKSMITH_IDENTITY=web-3
	if err != nil {
		return err
	}
	locker, err := config.Open(cfg)
	if err != nil {
		return err
	}
	defer locker.Close() // ends the Elector's campaigns too

	e, err := config.NewElector(locker, cfg, "{billing}:leader") // the call's elect options go after cfg's
	if err != nil {
		return err // redlock, setnx-getset: their locks number no terms
	}
	return e.Run(ctx, func(ctx context.Context, t *elect.Term) error {
		return schedule(ctx, t.Number())
	})
}
