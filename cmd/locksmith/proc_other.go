//go:build unix && !linux

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// child is a command that run started in a process group of its own.
type child struct {
	cmd    *exec.Cmd
	pid    int           // also the process group's id
	exited chan struct{} // closed when the command has exited (and, here, been reaped)
	err    error         // Wait's error, once exited is closed
}

// startChild starts cmd in a process group of its own. Only Linux has a
// parent-death signal: elsewhere, a command whose locksmith was killed runs
// on. Without waitid's WNOWAIT, the command is reaped as soon as it exits,
// so that its process group is signalled after its id was freed: a stranger
// could have taken it in between, a risk Linux avoids.
func startChild(cmd *exec.Cmd) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// reap returns the exited command's state.
func (c *child) reap() (*os.ProcessState, error) {
	<-c.exited
	return c.cmd.ProcessState, c.err
}
