//go:build !unix

package procs

import (
	"os"
	"syscall"
)

func sysProcAttr(bool) *syscall.SysProcAttr { return nil }

// stopSignal: without Unix signals a child can only be killed.
var stopSignal os.Signal = os.Kill
