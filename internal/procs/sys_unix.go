//go:build unix && !linux

package procs

import (
	"os"
	"syscall"
)

// sysProcAttr: outside Linux there is no parent-death signal.
func sysProcAttr(ownGroup bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: ownGroup} }

var stopSignal os.Signal = syscall.SIGTERM
