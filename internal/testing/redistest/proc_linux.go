package redistest

import "syscall"

// sysProcAttr kills the server if the test binary dies without cleaning up.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
