// Command pause is the process of a pod's sandbox container on the cluster's real nodes: it holds
// the pod's namespaces open and does nothing else. It reaps any child that ends up under it (a
// shared PID namespace makes it PID 1) and exits 0 on SIGINT or SIGTERM, as the sandbox's stop
// asks. Written here (no registry is reachable, so the sandbox image is built on this machine);
// static, no cgo.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
