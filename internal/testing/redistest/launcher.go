package redistest

import (
	"os/exec"
	"runtime"
	"sync"
)

// The servers are started from one OS thread that never ends. Their
// parent-death signal (see sysProcAttr) follows the thread that started
// them, not the process (go.dev/issue/27505), and Go ends a thread whose
// goroutine returns while locked to it: a server started from a thread
// that some other goroutine then locks and leaves locked (one that enters
// a network namespace, say) would be killed mid-test.
var (
	launcherOnce sync.Once
	launches     chan func()
)

// start starts cmd from the launcher's thread.
func start(cmd *exec.Cmd) error {
	launcherOnce.Do(func() {
		launches = make(chan func())
		go func() {
			runtime.LockOSThread() // for good: the thread never ends
			for f := range launches {
				f()
			}
		}()
	})
	done := make(chan error, 1)
	launches <- func() { done <- cmd.Start() }
	return <-done
}
