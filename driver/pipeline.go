package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/locksmith-go/lock/internal/neterr"
)

// Pipeliner is an optional interface of a [Conn] that sends several
// commands in one round trip: it writes them all, then reads their
// replies. A Conn to one server sends them over one connection; a Cluster
// client sends those of each master over a connection to it, the masters
// side by side. The strategies send their batched refreshes through it
// (strategy.Batcher): the scripts of many locks, or, without scripts, the
// commands of a transaction. Use the package's [Pipeline] and
// [Script.RunEach].
type Pipeliner interface {
	// Pipeline sends cmds, each a command's name (a string) and its
	// arguments as [Commander]'s Do takes them, and returns one reply
	// per command, in order, as Do would return it: a command that
	// failed has its error in its place, the server's, or why its
	// answer did not come. err is the call's own, and replies is then
	// nil: the Conn cannot be used, or ctx ended before the commands
	// were sent, or (as the Conn chooses) the connection failed.
	Pipeline(ctx context.Context, cmds [][]any) (replies []any, err error)
}

// Pipeline sends cmds through c and returns one reply per command,
// normalised as [Do]'s, with a command's error in its place (see
// [Pipeliner]): in one round trip if c implements Pipeliner, and otherwise
// one after another with [Do], up to the first command that gets no
// answer (it timed out, its connection died, or ctx ended), whose error
// the commands left get too. It returns an error, and no replies, when c
// sends no commands ([Commander]), when the first command got no answer,
// or when a command is not a name and its arguments.
func Pipeline(ctx context.Context, c Conn, cmds [][]any) ([]any, error) {
	for i, cmd := range cmds {
		if len(cmd) == 0 {
			return nil, fmt.Errorf("driver: Pipeline: command %d is empty", i)
		}
		if _, ok := cmd[0].(string); !ok {
			return nil, fmt.Errorf("driver: Pipeline: command %d: got %T, want a string", i, cmd[0])
		}
	}
	p, ok := c.(Pipeliner)
	if !ok {
		return oneByOne(ctx, c, cmds)
	}
	replies, err := p.Pipeline(ctx, cmds)
	if err != nil {
		return nil, err
	}
	if len(replies) != len(cmds) {
		return nil, fmt.Errorf("driver: %T.Pipeline: got %d replies, want %d", c, len(replies), len(cmds))
	}
	for i, r := range replies {
		replies[i] = normalize(r)
	}
	return replies, nil
}

// oneByOne is Pipeline over a Conn that does not pipeline.
func oneByOne(ctx context.Context, c Conn, cmds [][]any) ([]any, error) {
	if _, ok := c.(Commander); !ok {
		return nil, fmt.Errorf("driver: %T sends no commands of its choice: %w", c, errors.ErrUnsupported)
	}
	replies := make([]any, len(cmds))
	for i, cmd := range cmds {
		reply, err := Do(ctx, c, cmd...)
		switch {
		case err == nil:
			replies[i] = reply
		case i == 0 && (neterr.Unanswered(err) || ctx.Err() != nil):
			return nil, err
		case neterr.Unanswered(err) || ctx.Err() != nil:
			for j := i; j < len(cmds); j++ {
				replies[j] = err
			}
			return replies, nil
		default:
			replies[i] = err
		}
	}
	return replies, nil
}

// Call is one run of a [Script] in [Script.RunEach]: its keys and
// arguments, as [Script.Run] takes them, and, once RunEach returns, its
// reply and error, as Run would return them.
type Call struct {
	Keys []string // the script's keys
	Args []any    // its arguments

	Reply any   // its reply, normalised as Run's
	Err   error // its error, as Run's
}

// RunEach runs the script once for each call, and sets each one's Reply
// and Err: in one round trip through c's [Pipeline] (EVALSHA for each
// call), and one more for the calls whose server lacked the script
// (NOSCRIPT), with EVAL; with EVAL alone where Run would send it. Over a
// Conn marked [WithoutScripts], it sends nothing, and each call gets Run's
// error.
func (s *Script) RunEach(ctx context.Context, c Conn, calls []Call) {
	if ScriptsOff(c) {
		for i := range calls {
			calls[i].Err = errOff
		}
		return
	}
	which := make([]int, len(calls)) // the calls to send EVAL for
	for i := range which {
		which[i] = i
	}
	if sha := s.digest(ctx, c); sha != "" {
		which = runEach(ctx, c, "EVALSHA", sha, calls, which)
	}
	if len(which) > 0 {
		runEach(ctx, c, "EVAL", s.src, calls, which)
	}
}

// runEach sends cmd (EVALSHA or EVAL) with script for each call i in which,
// in one Pipeline, sets their Reply and Err, and returns the ones that got
// NOSCRIPT.
func runEach(ctx context.Context, c Conn, cmd, script string, calls []Call, which []int) (noScript []int) {
	cmds := make([][]any, len(which))
	for k, i := range which {
		cmds[k] = evalArgs(cmd, script, calls[i])
	}
	replies, err := Pipeline(ctx, c, cmds)
	for k, i := range which {
		calls[i].Reply, calls[i].Err = reply(replies, err, k)
		if isNoScript(calls[i].Err) {
			noScript = append(noScript, i)
		}
	}
	return noScript
}

// evalArgs returns the EVAL or EVALSHA command of call.
func evalArgs(cmd, script string, call Call) []any {
	args := make([]any, 0, 3+len(call.Keys)+len(call.Args))
	args = append(args, cmd, script, len(call.Keys))
	for _, k := range call.Keys {
		args = append(args, k)
	}
	return append(args, call.Args...)
}

// reply returns the reply i of a Pipeline that returned replies and err.
func reply(replies []any, err error, i int) (any, error) {
	if err != nil {
		return nil, err
	}
	if err, ok := replies[i].(error); ok {
		return nil, err
	}
	return replies[i], nil
}
