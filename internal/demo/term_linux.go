package demo

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

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
