// Command pause is the sandbox ("pause") container of hack/node.sh's node: it holds a pod's
// namespaces open and does nothing else. There is no registry to pull registry.k8s.io/pause from,
// so the node builds this one (hack/node writes it as an image tarball).
//
// As the first process of a pod that shares its PID namespace it also reaps orphaned children.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			// WNOHANG: reap every child that has exited, then wait for the next signal.
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
