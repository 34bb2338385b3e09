package main

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"
)

// child is a command that run started in a process group of its own.
type child struct {
	cmd *exec.Cmd
	pid int // also the process group's id
	// exited is closed when the command has exited, before it is reaped:
	// its pid, and so its group's id, cannot be taken by another process
	// until reap, so that signalling the group then reaches no stranger.
	exited chan struct{}
	reaped chan struct{} // reap closes it to have the command reaped
	done   chan error    // the reaping's result
}

// startChild starts cmd in a process group of its own, with SIGKILL as its
// parent-death signal: if locksmith dies, even of SIGKILL, the command dies
// with it rather than run on while the lease runs out. The kernel sends that
// signal when the thread that forked the command exits, not the process, so
// the command is started from a goroutine locked to its thread, which stays
// locked, and alive, until the command is reaped.
func startChild(cmd *exec.Cmd) (*child, error) { return startProcess(cmd, syscall.SIGKILL) }

// startProcess is startChild with deathSig as the parent-death signal:
// elect's watchdog gets SIGTERM, which it catches to kill its command's
// group before it exits.
func startProcess(cmd *exec.Cmd, deathSig syscall.Signal) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig}
	c := &child{cmd: cmd, exited: make(chan struct{}), reaped: make(chan struct{}), done: make(chan error, 1)}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		c.pid = cmd.Process.Pid
		started <- nil
		waitExited(c.pid)
		close(c.exited)
		<-c.reaped
		c.done <- cmd.Wait()
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// waitExited waits until the process pid has exited, without reaping it
// (waitid with WNOWAIT). An error (none is expected of a child of ours) ends
// the wait too: Wait then tells what happened.
func waitExited(pid int) {
	const pPID = 1     // P_PID
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// reap reaps the exited command and returns its state.
func (c *child) reap() (*os.ProcessState, error) {
	close(c.reaped)
	err := <-c.done
	return c.cmd.ProcessState, err
}
