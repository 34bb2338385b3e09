package driver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver"
)

// counting is a Conn with no optional interface, that counts its calls.
type counting struct{ calls *int }

func (c counting) call() { *c.calls++ }

func (c counting) SetNX(context.Context, string, string, time.Duration) (bool, error) {
	c.call()
	return true, nil
}
func (c counting) Get(context.Context, string) (string, bool, error) { c.call(); return "v", true, nil }
func (c counting) GetSet(context.Context, string, string) (string, bool, error) {
	c.call()
	return "", false, nil
}
func (c counting) Del(context.Context, string) (bool, error) { c.call(); return true, nil }
func (c counting) PTTL(context.Context, string) (time.Duration, bool, error) {
	c.call()
	return time.Second, true, nil
}
func (c counting) EvalSha(context.Context, string, []string, ...any) (any, error) {
	c.call()
	return nil, nil
}
func (c counting) Eval(context.Context, string, []string, ...any) (any, error) {
	c.call()
	return nil, nil
}

// every is a counting Conn with every optional interface.
type every struct{ counting }

func (every) Addr() string                              { return "every:6379" }
func (e every) Do(context.Context, ...any) (any, error) { e.call(); return "OK", nil }
func (e every) Pipeline(_ context.Context, cmds [][]any) ([]any, error) {
	e.call()
	return make([]any, len(cmds)), nil
}
func (every) Pinnable() error { return nil }
func (e every) Pin(_ context.Context, _ string, f func(driver.Conn) error) error {
	return f(e)
}
func (every) Validate() error { return errors.New("every: misconfigured") }
func (every) Listen(context.Context, func(driver.Event)) (driver.Session, error) {
	return nil, errors.New("every: listened")
}
func (every) Sharded() bool { return true }

// TestWithoutScripts: the marked Conn sends no script, and has the optional
// interfaces of the Conn it marks, and no other.
func TestWithoutScripts(t *testing.T) {
	ctx := context.Background()
	t.Run("scripts send nothing", func(t *testing.T) {
		calls := 0
		c := driver.WithoutScripts(every{counting{&calls}})
		script := driver.NewScript("return 1")
		_, errSha := c.EvalSha(ctx, script.SHA1(), nil)
		_, errEval := c.Eval(ctx, "return 1", nil)
		_, errRun := script.Run(ctx, c, nil)
		each := []driver.Call{{}, {}}
		script.RunEach(ctx, c, each)
		for name, err := range map[string]error{"EvalSha": errSha, "Eval": errEval, "Run": errRun, "RunEach[0]": each[0].Err, "RunEach[1]": each[1].Err} {
			if !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%s = %v, want an error matching errors.ErrUnsupported", name, err)
			}
		}
		if calls != 0 {
			t.Errorf("got %d calls of the marked Conn, want 0", calls)
		}
	})
	t.Run("marked", func(t *testing.T) {
		c := counting{new(int)}
		m := driver.WithoutScripts(c)
		if driver.ScriptsOff(c) || !driver.ScriptsOff(m) {
			t.Errorf("ScriptsOff = %v before the mark, %v after; want false, true", driver.ScriptsOff(c), driver.ScriptsOff(m))
		}
		if again := driver.WithoutScripts(m); again != m {
			t.Errorf("WithoutScripts of a marked Conn = %#v, want it as it is", again)
		}
	})
	t.Run("a marked nil Conn is refused as nil", func(t *testing.T) {
		if err := driver.Check(driver.WithoutScripts(nil)); err == nil {
			t.Error("Check(WithoutScripts(nil)) = nil, want the error of a nil Conn, which the constructors return")
		}
	})
	t.Run("Conn's methods forwarded", func(t *testing.T) {
		calls := 0
		c := driver.WithoutScripts(counting{&calls})
		_, _ = c.SetNX(ctx, "k", "v", time.Second)
		_, _, _ = c.Get(ctx, "k")
		_, _, _ = c.GetSet(ctx, "k", "v")
		_, _ = c.Del(ctx, "k")
		_, _, _ = c.PTTL(ctx, "k")
		if calls != 5 {
			t.Errorf("got %d calls of the Conn, want 5", calls)
		}
	})
	t.Run("no optional interface over a Conn without", func(t *testing.T) {
		c := driver.WithoutScripts(counting{new(int)})
		if _, ok := c.(driver.Subscriber); ok {
			t.Error("got a Subscriber, want none")
		}
		if got := driver.Addr(c); got != "" {
			t.Errorf("Addr = %q, want \"\"", got)
		}
		if err := driver.Check(c); err != nil {
			t.Errorf("Check = %v, want nil", err)
		}
		_, errDo := driver.Do(ctx, c, "PING")
		_, errPipeline := driver.Pipeline(ctx, c, [][]any{{"PING"}})
		for name, err := range map[string]error{"Do": errDo, "Pinnable": driver.Pinnable(c), "Pipeline": errPipeline} {
			if !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%s = %v, want an error matching errors.ErrUnsupported", name, err)
			}
		}
	})
	t.Run("every optional interface over a Conn with them", func(t *testing.T) {
		calls := 0
		c := driver.WithoutScripts(every{counting{&calls}})
		sub, ok := c.(driver.Subscriber)
		if !ok {
			t.Fatal("got no Subscriber, want one")
		}
		if _, err := sub.Listen(ctx, nil); err == nil || err.Error() != "every: listened" || !sub.Sharded() {
			t.Errorf("Listen, Sharded = %v, %v; want every's", err, sub.Sharded())
		}
		if got := driver.Addr(c); got != "every:6379" {
			t.Errorf("Addr = %q, want every:6379", got)
		}
		if err := driver.Check(c); err == nil || err.Error() != "every: misconfigured" {
			t.Errorf("Check = %v, want every's Validate error", err)
		}
		if got, err := driver.Do(ctx, c, "PING"); got != "OK" || err != nil {
			t.Errorf("Do = %v, %v; want OK, nil", got, err)
		}
		if got, err := driver.Pipeline(ctx, c, [][]any{{"PING"}, {"PING"}}); len(got) != 2 || err != nil {
			t.Errorf("Pipeline = %v, %v; want 2 replies, nil", got, err)
		}
		if calls != 2 {
			t.Errorf("got %d calls of the Conn, want 2: Do, Pipeline", calls)
		}
		err := driver.Pin(ctx, c, "k", func(one driver.Conn) error {
			if !driver.ScriptsOff(one) {
				t.Error("the pinned Conn is not marked, want it marked")
			}
			return nil
		})
		if err != nil {
			t.Errorf("Pin = %v, want nil", err)
		}
	})
}
