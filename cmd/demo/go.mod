module github.com/locksmith-go/lock/cmd/demo

go 1.24.9

replace github.com/locksmith-go/lock => ../..

require github.com/locksmith-go/lock v0.0.0-00010101000000-000000000000

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gomodule/redigo v1.9.3 // indirect
	github.com/redis/go-redis/v9 v9.22.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)
