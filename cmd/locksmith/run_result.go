package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"
)

// runResult is what --result-file holds: the outcome of run, for scripts
// that must know for sure (a command may exit with 75 or 79 itself). It
// never holds the token.
type runResult struct {
	// Outcome is completed (the command ran to its end with the lock
	// held), not_obtained, interrupted (by a signal, while waiting), lost,
	// max_runtime, not_found, not_executable, usage, config, unavailable
	// or error.
	Outcome     string     `json:"outcome"`
	ExitCode    int        `json:"exit_code"`              // locksmith's
	Lock        string     `json:"lock"`                   // of several NAMEs, the first, sorted
	Locks       []string   `json:"locks,omitempty"`        // several NAMEs, sorted
	ChildStatus *int       `json:"child_status,omitempty"` // the command's exit status, when it exited
	Signal      string     `json:"signal,omitempty"`       // what killed the command, or interrupted the wait
	Fence       *int64     `json:"fence,omitempty"`        // of several NAMEs, the first's
	Fences      fences     `json:"fences,omitempty"`       // several NAMEs: each one's
	Permits     int        `json:"permits,omitempty"`      // --permits: the semaphore's limit
	Permit      *int       `json:"permit,omitempty"`       // --permits: the permit held, 0 to permits-1
	WaitedMS    int64      `json:"waited_ms"`
	HeldMS      int64      `json:"held_ms"`
	Released    bool       `json:"released"`              // the release succeeded
	LostAt      *time.Time `json:"lost_at,omitempty"`     // when the loss was found, or SIGTERM was due for it
	LossReason  string     `json:"loss_reason,omitempty"` // broken, expired, taken, lapsed, or unconfirmed (refreshes failed)
	ValidUntil  *time.Time `json:"valid_until,omitempty"` // on loss, the last validity deadline
	Error       string     `json:"error,omitempty"`
}

// outcomes name the outcome of locksmith's own exit codes.
var outcomes = map[int]string{
	exitUsage: "usage", exitConfig: "config", exitUnavailable: "unavailable", exitInternal: "error",
}

// report completes the result from run's error, and writes --result-file.
// It returns err.
func (r *runner) report(err error) error {
	res := &r.res
	res.ExitCode = codeOf(err)
	if res.Outcome == "" {
		res.Outcome = outcomes[res.ExitCode]
		var se *signalError
		if errors.As(err, &se) {
			res.Outcome, res.Signal = "interrupted", signalName(se.sig)
		}
	}
	if err != nil && !silent(err) {
		res.Error = err.Error()
	}
	if r.f.resultFile == "" {
		return err
	}
	if werr := writeFile(r.f.resultFile, res); werr != nil {
		r.warnf("writing --result-file: %v", werr)
	}
	return err
}

// writeFile writes v as JSON to path, atomically: a reader sees the old
// file or the whole new one.
func writeFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a failure
	_, err = f.Write(append(b, '\n'))
	if err := errors.Join(err, f.Close()); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
