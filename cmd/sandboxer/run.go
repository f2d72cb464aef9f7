package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/roboco/sandboxer/internal/ids"
	"github.com/roboco/sandboxer/lifetime"
)

// killAfter is how many caught signals `run` forwards before it kills its
// command outright.
const killAfter = 3

func (a *app) runCmd() *cobra.Command {
	var pf provisionFlags
	cmd := &cobra.Command{
		Use:   "run [--owner ID] --services LIST -- CMD [ARGS...]",
		Short: "Provision sandboxes, run CMD with their env, tear down, exit with CMD's status",
		Long: `Provision sandboxes with their ports published on 127.0.0.1, run CMD with
their env added to its environment, and tear them down when CMD exits,
whatever the reason: CMD succeeding or failing, or SIGINT, SIGTERM, SIGHUP
(a closed terminal) or SIGQUIT to sandboxer. Exits with CMD's status (128+n
when CMD was killed by signal n).

The sandboxes are owned by this sandboxer process (process-owner labels:
boot id, pid namespace, pid, start time), so a concurrent ` + "`sandboxer gc`" + ` or
janitor leaves them alone while it runs and removes them if it is killed
with SIGKILL. The owner id is generated (run-<hex>) unless --owner is given.

Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to CMD (to its
whole process group when stdin is not a terminal; on a terminal CMD shares
sandboxer's process group and gets Ctrl-C and Ctrl-\ from the terminal
itself, so only SIGTERM and SIGHUP are forwarded). The third signal kills
CMD. A signal during provisioning rolls back and exits 128+n without
starting CMD. Under nohup, SIGHUP stays ignored.`,
		Args: cobra.MinimumNArgs(1),
		RunE: a.command(func(cmd *cobra.Command, args []string) error {
			owner := pf.owner
			if owner == "" {
				owner = "run-" + ids.Hex(4)
			}
			opts, services, err := pf.options(a, owner)
			if err != nil {
				return err
			}
			labels, err := lifetime.ProcessOwnerLabels(a.labelPrefix)
			if err != nil {
				return fmt.Errorf("run: process identity for the owner labels: %w", err)
			}
			opts.Labels = labels
			path, err := exec.LookPath(args[0])
			if err != nil {
				code := ExitNotFound
				if errors.Is(err, os.ErrPermission) {
					code = ExitCannotExec
				}
				return &exitError{code: code, err: fmt.Errorf("run: %w", err)}
			}

			ctx := cmd.Context()
			rt, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			p, sb, err := a.provision(ctx, rt, opts, owner, services)
			if err != nil {
				return err
			}

			// From here on, every path tears down.
			status, runErr := a.runChild(path, args, sb.Environ())
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
			defer cancel()
			removed, terr := p.TeardownSandbox(tctx, sb) // only this call's: an --owner may have others
			a.log.Debug("run: torn down", "owner", sb.Owner, "removed", len(removed))
			switch {
			case runErr != nil:
				return &exitError{code: status, err: errors.Join(runErr, terr)}
			case terr != nil:
				if status == 0 {
					status = ExitFailure
				}
				return &exitError{code: status, err: fmt.Errorf("run: teardown after CMD exited: %w", terr)}
			case status != 0:
				return &exitError{code: status}
			}
			return nil
		}),
	}
	pf.add(cmd, a.registry, "owner id (default: generated, run-<hex>)")
	// Everything after the first argument is CMD's, flags included.
	cmd.Flags().SetInterspersed(false)
	return cmd
}

// runChild runs the command with the sandbox env and returns its exit
// status. A signal that arrived before it could start means it is not
// started: the status is then 128+n.
func (a *app) runChild(path string, args, env []string) (int, error) {
	c := exec.Command(path, args[1:]...)
	c.Args[0] = args[0]
	c.Env = append(os.Environ(), env...)
	c.Stdin, c.Stdout, c.Stderr = a.io.In, a.io.Out, a.io.Err
	onTTY := false
	if f, ok := a.io.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		onTTY = true
	}
	// Pdeathsig: if sandboxer itself dies (SIGKILL), so does CMD; its
	// sandboxes are then the janitor's (their owner process is gone).
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: !onTTY, Pdeathsig: syscall.SIGKILL}

	sigCh := make(chan os.Signal, 8)
	if early := a.sigs.setForward(func(s os.Signal) {
		select {
		case sigCh <- s:
		default:
		}
	}); early != nil {
		a.sigs.setForward(func(os.Signal) {})
		return signalCode(early), fmt.Errorf("run: interrupted by %s before CMD started; sandboxes torn down", signalName(early))
	}
	defer a.sigs.setForward(func(os.Signal) {}) // signals during teardown: ignored

	type result struct {
		state *os.ProcessState
		err   error
	}
	started := make(chan error, 1)
	done := make(chan result, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child exits:
		// keep this goroutine on its thread until the child is gone.
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		if err := c.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := c.Wait()
		done <- result{c.ProcessState, err}
	}()
	if err := <-started; err != nil {
		code := ExitCannotExec
		if errors.Is(err, os.ErrNotExist) {
			code = ExitNotFound
		}
		return code, fmt.Errorf("run: start %s: %w", args[0], err)
	}
	pid := c.Process.Pid
	a.log.Debug("run: CMD started", "pid", pid, "cmd", args[0])

	forwarded := 0
	for {
		select {
		case s := <-sigCh:
			sig, ok := s.(syscall.Signal)
			if !ok || (onTTY && keyboardSignal(sig)) {
				continue
			}
			forwarded++
			if forwarded >= killAfter {
				sig = syscall.SIGKILL
			}
			a.log.Info("run: forwarding signal to CMD", "signal", signalName(sig), "pid", pid)
			target := pid
			if !onTTY {
				target = -pid // the whole process group
			}
			if err := syscall.Kill(target, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				a.log.Warn("run: forward signal", "signal", signalName(sig), "error", err)
			}
		case r := <-done:
			ws, _ := r.state.Sys().(syscall.WaitStatus)
			status := r.state.ExitCode()
			if ws.Signaled() {
				status = ExitSignal + int(ws.Signal())
			}
			a.log.Debug("run: CMD exited", "status", status)
			var xe *exec.ExitError
			if r.err != nil && !errors.As(r.err, &xe) {
				return status, fmt.Errorf("run: wait for %s: %w", args[0], r.err)
			}
			return status, nil
		}
	}
}

// keyboardSignal reports whether a terminal sends sig to its whole
// foreground process group (Ctrl-C, Ctrl-\): on a terminal CMD has it
// already, and forwarding it would deliver it twice. A hangup is forwarded
// all the same: the terminal sends SIGHUP to its controlling process only.
func keyboardSignal(sig syscall.Signal) bool {
	return sig == syscall.SIGINT || sig == syscall.SIGQUIT
}
