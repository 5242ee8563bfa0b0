package proxy

import (
	"net"
	"syscall"
)

// peekAlive reports whether an idle connection is still usable: a non-blocking peek finds
// nothing to read. EOF (the server closed it) or unexpected bytes mean it is not.
func peekAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true // never wait for readiness: the answer is now or never
	})
	return err == nil && alive
}
