// Command sandboxer gives agents, developers and CI jobs throwaway Postgres,
// Redis and Mongo sandboxes as sibling containers on Docker, Podman,
// containerd or Kubernetes: it links every adapter (runtime/all).
//
// Commands: up, spawn, down, adopt, ls, gc, janitor, run, engines, doctor,
// warm, images, version; `sandboxer --help` lists the global flags and the
// exit codes. The command is a thin layer: flags, output formats and exit codes. The lifecycle lives in the
// provision and janitor packages, the runtime choice in runtime/detect.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	// The CLI links every runtime adapter; each registers itself with
	// runtime/detect.
	_ "github.com/roboco/sandboxer/engines/all"
	_ "github.com/roboco/sandboxer/runtime/all"
)

func main() {
	sigs := newSignalRouter()
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, caughtSignals()...)
	go func() {
		for s := range ch {
			sigs.deliver(s)
		}
	}()
	os.Exit(Main(context.Background(), os.Args[1:], Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Getenv, sigs))
}

// caughtSignals are the signals that tear down (`run`) or roll back (`up`)
// instead of killing sandboxer on the spot: SIGINT (Ctrl-C), SIGTERM
// (supervisors), SIGQUIT (Ctrl-\; Go's default would dump the goroutines
// and exit, leaking the sandboxes) and SIGHUP (a closed terminal). A SIGHUP
// that the parent ignored stays ignored, so that `nohup sandboxer run ...`
// survives the terminal as nohup promises.
func caughtSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}
