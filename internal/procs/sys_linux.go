package procs

import (
	"os"
	"syscall"
)

// sysProcAttr has the kernel kill the child should this process die first.
func sysProcAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup, Pdeathsig: syscall.SIGKILL}
}

var stopSignal os.Signal = syscall.SIGTERM
