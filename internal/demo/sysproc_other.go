//go:build !unix

package demo

import (
	"io"
	"os"
	"syscall"
)

func childAttr() *syscall.SysProcAttr { return nil }

// stopSignal: without Unix signals a child can only be killed.
var stopSignal os.Signal = os.Kill

// termSize is unknown here: the live view is not cut to the terminal.
func termSize(io.Writer) (cols, rows int) { return 0, 0 }
