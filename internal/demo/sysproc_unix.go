//go:build unix && !linux

package demo

import (
	"io"
	"os"
	"syscall"
)

// childAttr puts a child in its own process group: a Ctrl-C reaches the demo, which then stops
// its children in order.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// stopSignal asks a child to shut down gracefully.
var stopSignal os.Signal = syscall.SIGTERM

// termSize is unknown here: the live view is not cut to the terminal.
func termSize(io.Writer) (cols, rows int) { return 0, 0 }
