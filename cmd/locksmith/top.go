package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func (a *app) topCommand() *cobra.Command {
	var (
		f        listFlags
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "top [PREFIX] [--interval DUR] [--limit N] [--timeout DUR]",
		Short: "Watch the most contended locks, live",
		Long: `top shows, refreshed every --interval (1s), the locks held whose names start
with PREFIX (every lock without one), the most contended first, as top(1)
shows processes: by waiters, then the longest wait, then how long they have
been held. It fills the terminal, and says how many more there are; a line
above the table counts the locks held and contended (with waiters), or
says why the last refresh failed (it goes on refreshing).

Press q to quit (exit 0), or Ctrl-C (exit 130). When stdout is not a
terminal, it writes each refresh as it comes, followed by a blank line, and
reads q from stdin.

` + listHelp + `

A refresh that --timeout ends shows what it found until then.

Exit codes: 0 quit with q, 130 interrupted (Ctrl-C), 64 usage, 78
configuration (or a strategy or driver that cannot list).`,
		Args: args(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check("top"); err != nil {
				return err
			}
			if interval <= 0 {
				return exit(exitUsage, fmt.Errorf("top: --interval %v: want a positive duration", interval))
			}
			return a.top(cmd.Context(), strings.Join(args, ""), f, interval)
		},
	}
	f.add(cmd, "how long each refresh's listing may take")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often to refresh")
	return cmd
}

// top runs the live view of the locks held under prefix until q, Ctrl-C or
// a signal.
func (a *app) top(ctx context.Context, prefix string, f listFlags, interval time.Duration) error {
	l, done, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	s, err := openScreen(a.stdin, a.stdout)
	if err != nil {
		return exit(exitInternal, err)
	}
	defer s.close()
	live, stop := context.WithCancel(ctx) // the listings, which q ends
	defer stop()
	quit := make(chan error, 1)
	go func() {
		if ok, err := s.readQuit(); ok {
			quit <- err
			stop()
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		call, cancel := context.WithTimeout(live, f.timeout)
		held, err := l.locker.List(call, prefix, f.limit)
		cancel()
		if err := listError(err); codeOf(err) == exitConfig {
			return err
		}
		select {
		case err := <-quit:
			return err
		case <-ctx.Done():
			return ctx.Err() // a signal: execute exits 128+N
		default:
		}
		rows, width := s.size()
		s.draw(topFrame(prefix, listReports(held), err, n, interval, f.limit, rows, width))
		select {
		case err := <-quit:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// topFrame returns the lines of one refresh, the n-th, of the held locks
// rs (err: why the listing ended early), to fit rows lines of width
// characters (0: no bound).
func topFrame(prefix string, rs []listedReport, err error, n int, interval time.Duration, limit, rows, width int) []string {
	contended(rs)
	busy := 0
	for _, r := range rs {
		if r.Waiters > 0 {
			busy++
		}
	}
	status := fmt.Sprintf("%d held, %d contended", len(rs), busy)
	switch {
	case err != nil:
		status += "; error: " + err.Error()
	case len(rs) == limit:
		status += fmt.Sprintf(" (the first %d: --limit)", limit)
	}
	lines := []string{
		fmt.Sprintf("locksmith top %s   %s   refresh %d, every %v   q: quit", strconv.Quote(prefix), time.Now().Format(time.TimeOnly), n, interval),
		status,
		"",
	}
	if len(rs) == 0 {
		lines = append(lines, "no lock held under "+strconv.Quote(prefix))
	} else {
		room := len(rs)
		if rows > 0 {
			room = max(rows-len(lines)-2, 1) // the header, and the line of those left out
		}
		var b bytes.Buffer
		_ = listTable(&b, rs[:min(room, len(rs))])
		lines = append(lines, strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")...)
		if left := len(rs) - room; left > 0 {
			lines = append(lines, fmt.Sprintf("… and %d more", left))
		}
	}
	if width > 0 {
		for i, line := range lines {
			if r := []rune(line); len(r) > width {
				lines[i] = string(r[:width])
			}
		}
	}
	return lines
}

// screen is where top draws: a terminal, in raw mode, on its alternate
// screen, or a stream.
type screen struct {
	in       io.Reader
	out      io.Writer
	outFd    int         // stdout's file descriptor when it is a terminal, else -1
	inFd     int         // stdin's when it is a terminal in raw mode, else -1
	oldState *term.State // stdin's mode before, restored by close
	eol      string      // "\r\n" in raw mode, which does not turn "\n" into it
}

// openScreen returns the screen of in and out: a terminal's, in raw mode
// so that q needs no Enter, and on its alternate screen, when they are
// terminals.
func openScreen(in io.Reader, out io.Writer) (*screen, error) {
	s := &screen{in: in, out: out, outFd: -1, inFd: -1, eol: "\n"}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		s.outFd = int(f.Fd())
	}
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		old, err := term.MakeRaw(int(f.Fd()))
		if err != nil {
			return nil, fmt.Errorf("top: the terminal's raw mode: %w", err)
		}
		s.inFd, s.oldState, s.eol = int(f.Fd()), old, "\r\n"
	}
	if s.outFd >= 0 {
		fmt.Fprint(out, "\x1b[?1049h\x1b[?25l") // the alternate screen, no cursor
	}
	return s, nil
}

// close gives the terminal back as it was.
func (s *screen) close() {
	if s.outFd >= 0 {
		fmt.Fprint(s.out, "\x1b[?25h\x1b[?1049l")
	}
	if s.oldState != nil {
		_ = term.Restore(s.inFd, s.oldState)
	}
}

// size returns the terminal's rows and columns, 0 and 0 for a stream.
func (s *screen) size() (rows, width int) {
	if s.outFd < 0 {
		return 0, 0
	}
	w, h, err := term.GetSize(s.outFd)
	if err != nil {
		return 0, 0
	}
	return h, w
}

// draw writes a frame: over the last one on a terminal, after it on a
// stream, followed by a blank line.
func (s *screen) draw(lines []string) {
	var b strings.Builder
	if s.outFd >= 0 {
		b.WriteString("\x1b[H")
	}
	for _, line := range lines {
		b.WriteString(line)
		if s.outFd >= 0 {
			b.WriteString("\x1b[K") // the rest of the last frame's line
		}
		b.WriteString(s.eol)
	}
	if s.outFd >= 0 {
		b.WriteString("\x1b[J") // the last frame's lines below
	} else {
		b.WriteString(s.eol)
	}
	_, _ = io.WriteString(s.out, b.String())
}

// readQuit reads stdin until q, and returns nil, or until Ctrl-C in raw
// mode, and returns the exit of an interrupt; ok is false at the end of
// stdin, or on its error: top then runs until a signal.
func (s *screen) readQuit() (ok bool, err error) {
	buf := make([]byte, 64)
	for {
		n, rerr := s.in.Read(buf)
		for _, c := range buf[:n] {
			switch c {
			case 'q', 'Q':
				return true, nil
			case 3: // Ctrl-C, which raw mode reads as a byte
				return true, exit(exitSignal+int(syscall.SIGINT), nil)
			}
		}
		if rerr != nil {
			return false, nil
		}
	}
}
