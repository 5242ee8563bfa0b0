package demo

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// childAttr puts a child in its own process group (a Ctrl-C reaches the demo, which then stops
// its children in order) and has the kernel kill it should the demo die without cleaning up.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// stopSignal asks a child to shut down gracefully.
var stopSignal os.Signal = syscall.SIGTERM

// termSize returns the columns and rows of the terminal w is, or 0, 0.
func termSize(w io.Writer) (cols, rows int) {
	f, ok := w.(*os.File)
	if !ok {
		return 0, 0
	}
	var ws struct{ Row, Col, X, Y uint16 }
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws))); e != 0 {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}
