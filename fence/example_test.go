package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/fence"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

// A holder of the lock on orders:42 writes the order's status with its
// fencing token (beside the lock's key, not in it); once the lock passed
// on and the next holder wrote, the first holder's token is refused.
func ExampleSet() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	conn := goredis.New(client)
	locker, err := single.New(conn)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// A holds the lock, and writes with its token.
	a, err := locker.Obtain(ctx, "orders:42", time.Minute, lock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	tokenA, _ := a.Fence()
	fmt.Println("A writes:", fence.Set(ctx, conn, "orders:42:status", "packed", tokenA))
	if err := a.Release(ctx); err != nil { // as if its lease had run out while A was paused
		log.Fatal(err)
	}

	// B holds the lock next, and writes with its larger token.
	b, err := locker.Obtain(ctx, "orders:42", time.Minute, lock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Release(ctx)
	tokenB, _ := b.Fence()
	fmt.Println("B writes:", fence.Set(ctx, conn, "orders:42:status", "shipped", tokenB))

	// A wakes up and writes again: refused.
	err = fence.Set(ctx, conn, "orders:42:status", "packed again", tokenA)
	var stale *fence.StaleError
	fmt.Println("A refused:", errors.Is(err, fence.ErrStale), errors.As(err, &stale) && stale.Fence == tokenB)
	value, _, _ := conn.Get(ctx, "orders:42:status")
	fmt.Println("stored:", value)
	// Output:
	// A writes: <nil>
	// B writes: <nil>
	// A refused: true true
	// stored: shipped
}

// Run's body sees its own KEYS and ARGV: here, it appends to a list, and
// replies its length.
func ExampleRun() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	conn := goredis.New(client)
	ctx := context.Background()

	fenceKey, err := fence.KeyOf("{orders:42}:events")
	if err != nil {
		log.Fatal(err)
	}
	const appendEvent = `return redis.call('RPUSH', KEYS[1], ARGV[1])`
	n, err := fence.Run(ctx, conn, fenceKey, 7, appendEvent, []string{"{orders:42}:events"}, "shipped")
	fmt.Println(fenceKey, n, err)
	_, err = fence.Run(ctx, conn, fenceKey, 6, appendEvent, []string{"{orders:42}:events"}, "packed")
	fmt.Println(err)
	// Output:
	// {orders:42}:events:fenced 1 <nil>
	// fence: {orders:42}:events:fenced: stale fencing token 6, below the fence 7
}

// The same rule in SQL: the row keeps the largest token that wrote it, and
// an UPDATE with a lower one matches no row.
func Example_sql() {
	var db *sql.DB // sql.Open with the driver of your database
	ctx := context.Background()
	err := saveBalance(ctx, db, "acct-7", 1200, 42)
	if errors.Is(err, fence.ErrStale) {
		log.Print("a newer holder of the lock wrote the account: this holder stops")
	}
}

// saveBalance writes the balance of account id with the fencing token of
// the lock on it.
func saveBalance(ctx context.Context, db *sql.DB, id string, balance, token int64) error {
	res, err := db.ExecContext(ctx,
		`UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2`,
		balance, token, id)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fence.ErrStale // or there is no such account
	}
	return nil
}

// The same rule over HTTP: the client sends its token in a header, and the
// server answers 412 Precondition Failed to a token below the largest it
// has seen for the resource.
func Example_http() {
	http.Handle("/orders/", &fenced{})
	ctx := context.Background()
	err := put(ctx, "http://orders.internal/orders/42", "shipped", 42)
	if errors.Is(err, fence.ErrStale) {
		log.Print("a newer holder of the lock wrote the order: this holder stops")
	}
}

// put sends body to url with the fencing token of the lock on it.
func put(ctx context.Context, url, body string, token int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Fencing-Token", strconv.FormatInt(token, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPreconditionFailed:
		return fence.ErrStale
	case http.StatusOK, http.StatusNoContent:
		return nil
	}
	return fmt.Errorf("PUT %s: %s", url, resp.Status)
}

// fenced is a handler that keeps the largest token it has seen per
// resource, and refuses a PUT with a lower one.
type fenced struct {
	mu     sync.Mutex
	fences map[string]int64 // by path
}

func (h *fenced) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, err := strconv.ParseInt(r.Header.Get("Fencing-Token"), 10, 64)
	if r.Method != http.MethodPut || err != nil || token <= 0 {
		http.Error(w, "want a PUT with a Fencing-Token", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if token < h.fences[r.URL.Path] {
		http.Error(w, "stale fencing token", http.StatusPreconditionFailed)
		return
	}
	if h.fences == nil {
		h.fences = map[string]int64{}
	}
	h.fences[r.URL.Path] = token
	// ... store the body, under h.mu ...
	w.WriteHeader(http.StatusNoContent)
}
