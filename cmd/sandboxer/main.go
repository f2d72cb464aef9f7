// Command sandboxer gives agents, developers and CI jobs throwaway Postgres,
// Redis and Mongo sandboxes as sibling containers on Docker, Podman or
// containerd.
//
// Commands: up, down, ls, gc, janitor, run, engines, doctor; `sandboxer
// --help` lists the global flags and the exit codes. The command is a thin
// layer: flags, output formats and exit codes. The lifecycle lives in the
// provision and janitor packages, the runtime choice in runtime/detect.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := newSignalRouter()
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range ch {
			sigs.deliver(s)
		}
	}()
	os.Exit(Main(context.Background(), os.Args[1:], Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Getenv, sigs))
}
