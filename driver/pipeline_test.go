package driver_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// commandsOnly is a Conn that sends commands of its choice, but does not
// pipeline.
type commandsOnly struct{ driver.Conn }

func (c commandsOnly) Do(ctx context.Context, args ...any) (any, error) {
	return driver.Do(ctx, c.Conn, args...)
}

// scripted is a Conn whose Do answers from replies, in turn.
type scripted struct {
	driver.Conn
	replies []any
	sent    int
}

func (c *scripted) Do(_ context.Context, _ ...any) (any, error) {
	r := c.replies[c.sent]
	c.sent++
	if err, ok := r.(error); ok {
		return nil, err
	}
	return r, nil
}

// TestPipelineOneByOne: over a Conn that does not pipeline, Pipeline sends
// the commands one after another, each with its own reply or error in
// its place, as a Conn that pipelines replies; a command that gets no
// answer ends the pipeline, its error in the place of each command left;
// and a Conn that sends no commands of its choice is refused.
func TestPipelineOneByOne(t *testing.T) {
	ctx := context.Background()
	t.Run("each command gets its reply, in order", func(t *testing.T) {
		srv := redistest.Start(t, 1)[0]
		for _, d := range redistest.Drivers() {
			t.Run(d.Name, func(t *testing.T) {
				c := commandsOnly{d.Conn(t, srv.Addr)}
				key := "pipeline:" + d.Name
				replies, err := driver.Pipeline(ctx, c, [][]any{{"SET", key, "v"}, {"GET", key}, {"INCR", key}, {"DEL", key}, {"GET", key}})
				if err != nil || len(replies) != 5 {
					t.Fatalf("Pipeline = %#v, %v; want 5 replies", replies, err)
				}
				if _, ok := replies[2].(error); !ok {
					t.Errorf("INCR of a string = %#v, want its error in its place", replies[2])
				}
				replies[2] = nil
				if want := []any{"OK", "v", nil, int64(1), nil}; !reflect.DeepEqual(replies, want) {
					t.Errorf("Pipeline = %#v, want %#v", replies, want)
				}
			})
		}
	})
	t.Run("a command without an answer ends it", func(t *testing.T) {
		c := &scripted{replies: []any{"OK", os.ErrDeadlineExceeded, "never sent"}}
		replies, err := driver.Pipeline(ctx, c, [][]any{{"PING"}, {"PING"}, {"PING"}})
		if want := []any{"OK", os.ErrDeadlineExceeded, os.ErrDeadlineExceeded}; err != nil || !reflect.DeepEqual(replies, want) {
			t.Errorf("Pipeline = %#v, %v; want %#v, nil", replies, err, want)
		}
		if c.sent != 2 {
			t.Errorf("sent %d commands, want 2", c.sent)
		}
	})
	t.Run("a first command without an answer is the call's error", func(t *testing.T) {
		c := &scripted{replies: []any{os.ErrDeadlineExceeded}}
		if replies, err := driver.Pipeline(ctx, c, [][]any{{"PING"}, {"PING"}}); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Pipeline = %#v, %v; want an error matching %v", replies, err, os.ErrDeadlineExceeded)
		}
	})
	t.Run("a Conn without Do is refused", func(t *testing.T) {
		var c struct{ driver.Conn }
		if _, err := driver.Pipeline(ctx, c, [][]any{{"PING"}}); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Pipeline = %v, want an error matching errors.ErrUnsupported", err)
		}
	})
	t.Run("a command that is not a name is refused", func(t *testing.T) {
		c := &scripted{}
		for _, cmds := range [][][]any{{{}}, {{42}}} {
			if _, err := driver.Pipeline(ctx, c, cmds); err == nil || c.sent != 0 {
				t.Errorf("Pipeline(%v) = %v, sent %d; want an error, nothing sent", cmds, err, c.sent)
			}
		}
	})
}
