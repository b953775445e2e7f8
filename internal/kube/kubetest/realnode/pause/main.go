// Command pause is the pod sandbox's "pause" process for the test node
// (realnode): it waits for SIGTERM or SIGINT and exits 0. Test-only.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
