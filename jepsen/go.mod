module github.com/locksmith-go/lock/jepsen

go 1.24.9
