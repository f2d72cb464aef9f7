package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/ids"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// The CLI part's figures: one sandbox of the quickest engine through
// `sandboxer up`, a process per call as a user runs it, beside the
// runtime's own CLI running the same container (`docker run -d`), each
// until a real client's first login.
func figCLIUp(engine string) string { return "sandboxer up, one " + engine + " (a process)" }
func figCLIOwn(engine string) string {
	return "baseline: the runtime's CLI run + login, one " + engine + " (a process)"
}

// declareCLI declares the CLI part's figures.
func (s *Suite) declareCLI() {
	e := quickest(s.Registry)
	own := "the runtime's own CLI"
	if len(s.OwnCLI) > 0 {
		own = strings.Join(s.OwnCLI[:1], " ")
	}
	s.report.Figures = append(s.report.Figures,
		&Figure{Name: figCLIUp(e), Unit: UnitMS, Baseline: figCLIOwn(e), Target: &Target{Kind: TargetRatio, Value: 1.05},
			Note: "a cold `sandboxer up --services " + e + "` process, host mode (its owner network included), until it exits with the env, then the first login at the URL it printed"},
		&Figure{Name: figCLIOwn(e), Unit: UnitMS,
			Note: "`" + own + " run -d` of the same image, env (from a 0600 env file), command, tmpfs, limits and confinement on the runtime's default network, a port on 127.0.0.1, then a real client login polled every 20 ms"},
	)
}

// cliUnmeasurable says why the CLI part cannot run ("" when it can).
func (s *Suite) cliUnmeasurable() string {
	switch {
	case s.mode != ModeHost:
		return "n/a in " + string(s.mode) + " mode: the CLI part publishes on 127.0.0.1"
	case len(s.CLI) == 0:
		return "n/a: no sandboxer binary given (Suite.CLI)"
	case len(s.OwnCLI) == 0:
		return fmt.Sprintf("n/a on %s: no CLI of its own that runs a container as `docker run` does", s.RT.Name())
	}
	return ""
}

// cliRound measures the runtime's own CLI and then `sandboxer up`, once
// each (recording nothing in the warm-up round).
func (s *Suite) cliRound(ctx context.Context, r int) {
	engine := quickest(s.Registry)
	record := func(fig string, d time.Duration, err error) {
		switch {
		case err != nil:
			s.fail(fig, err)
		case !s.warming:
			s.sample(fig, ms(d))
		}
	}
	d, err := s.ownCLIRun(ctx, engine, r)
	record(figCLIOwn(engine), d, err)
	d, err = s.cliUp(ctx, engine, r)
	record(figCLIUp(engine), d, err)
}

// ownCLIRun runs engine's container with the runtime's own CLI, as the
// provisioner's spec describes it, and polls a real client login; the
// password goes through a 0600 env file, never argv.
func (s *Suite) ownCLIRun(ctx context.Context, engine string, r int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cliCallTimeout)
	defer cancel()
	e, _ := s.Registry.Lookup(engine)
	cred, err := engines.NewCredentials()
	if err != nil {
		return 0, err
	}
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	name := provision.ContainerName(s.prefix, e.Spec().Short, fmt.Sprintf("own%d-%s", r, ids.Hex(2)))
	spec := s.spec(engine, name, cred, s.benchLabels())
	envFile, err := writeEnvFile(spec.Env)
	if err != nil {
		return 0, err
	}
	defer os.Remove(envFile)
	args := runArgs(spec, envFile, port)
	v, ok := URLVar(e.Env("X", engines.Endpoint{Host: runtime.DefaultHostIP, Port: port}, cred))
	if !ok {
		return 0, fmt.Errorf("%s emits no URL", engine)
	}

	start := time.Now()
	out, err := s.command(ctx, s.OwnCLI, args...).Output()
	id := strings.TrimSpace(string(out))
	if id != "" {
		defer s.remove(ctx, id)
	}
	if err != nil {
		return 0, fmt.Errorf("%s run: %w", s.OwnCLI[0], exitError(err))
	}
	if err := PollLogin(ctx, Logins[engine], v.Value, e.Spec().ReadyTimeout); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// cliUp runs `sandboxer up` for one sandbox of engine, logs in at the URL
// it printed, and tears the sandbox down with `sandboxer down` (not
// timed).
func (s *Suite) cliUp(ctx context.Context, engine string, r int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cliCallTimeout)
	defer cancel()
	e, _ := s.Registry.Lookup(engine)
	owner := fmt.Sprintf("cli%d-%s", r, ids.Hex(2))
	global := []string{"--label-prefix", s.prefix, "--quiet", "--image", engine + "=" + s.Images[engine]}
	start := time.Now()
	out, err := s.command(ctx, s.CLI, append(global, "up", "--owner", owner, "--services", engine, "--format", "json")...).Output()
	defer func() {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), cliCallTimeout)
		defer dcancel()
		if derr := s.command(dctx, s.CLI, append(global, "down", "--owner", owner)...).Run(); derr != nil {
			s.fail("sandboxer down "+owner, exitError(derr))
		}
	}()
	if err != nil {
		return 0, fmt.Errorf("sandboxer up: %w", exitError(err))
	}
	var report struct{ Env []engines.EnvVar }
	if err := json.Unmarshal(out, &report); err != nil {
		return 0, fmt.Errorf("sandboxer up: its JSON: %w", err)
	}
	v, ok := URLVar(report.Env)
	if !ok {
		return 0, errors.New("sandboxer up: no URL in its env")
	}
	if err := PollLogin(ctx, Logins[engine], v.Value, e.Spec().ReadyTimeout); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// command is argv[0] with argv[1:] and args, bounded by cliTimeout.
func (s *Suite) command(ctx context.Context, argv []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], append(slices.Clone(argv[1:]), args...)...)
	cmd.WaitDelay = cliTimeout
	return cmd
}

// cliTimeout bounds how long a CLI process may outlive its context.
const cliTimeout = 5 * time.Second

// cliCallTimeout bounds one measurement of the CLI part (a run or an up,
// and the login after it), so that a hung CLI never stalls the bench.
const cliCallTimeout = 3 * time.Minute

// runArgs is `run -d` for spec in the flags docker and podman share,
// published on 127.0.0.1:port, its env read from envFile.
func runArgs(spec runtime.RunSpec, envFile string, port int) []string {
	args := []string{"run", "-d", "--name", spec.Name, "--env-file", envFile,
		"--security-opt", "no-new-privileges", "--cap-drop", "ALL"}
	for _, k := range slices.Sorted(maps.Keys(spec.Labels)) {
		args = append(args, "--label", k+"="+spec.Labels[k])
	}
	for _, c := range spec.Capabilities {
		args = append(args, "--cap-add", c)
	}
	for _, p := range spec.Ports {
		args = append(args, "-p", fmt.Sprintf("%s:%d:%d/%s", runtime.DefaultHostIP, port, p.ContainerPort, p.Protocol))
	}
	if spec.MemoryBytes > 0 {
		args = append(args, "--memory", strconv.FormatInt(spec.MemoryBytes, 10))
	}
	if spec.CPUs > 0 {
		args = append(args, "--cpus", strconv.FormatFloat(spec.CPUs, 'f', -1, 64))
	}
	for _, path := range slices.Sorted(maps.Keys(spec.Tmpfs)) {
		t := path
		if o := spec.Tmpfs[path]; o != "" {
			t += ":" + o
		}
		args = append(args, "--tmpfs", t)
	}
	args = append(args, spec.Image)
	return append(args, spec.Command...)
}

// writeEnvFile writes env to a new 0600 file, one KEY=VALUE per line.
func writeEnvFile(env map[string]string) (string, error) {
	f, err := os.CreateTemp("", "sandboxer-bench-env-")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if strings.ContainsAny(env[k], "\n\r") {
			f.Close()
			os.Remove(f.Name())
			return "", fmt.Errorf("env %s: a value with a line break cannot go through an env file", k)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, env[k])
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// freePort is a port on 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", runtime.DefaultHostIP+":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// exitError adds a failed process's stderr to its error.
func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
