// Command sandboxer-bench is the end-to-end benchmark driver behind
// `make bench`. For each runtime asked for (every landed adapter by
// default; kubernetes when KUBECONFIG is set) that answers, it runs the
// bench suite with the stand-in images of build/images.env (or
// SANDBOXER_IMAGE_*), writes bench/results/<runtime>.md and .json, and
// prints the table.
//
// Usage:
//
//	go run ./bench/cmd/sandboxer-bench [-runtime docker,podman,containerd,kubernetes] [-n 5] [-out bench/results] [-only engines,trio]
//
// A runtime named explicitly with -runtime must answer (exit status 1
// otherwise); with the default, "all", runtimes that do not answer are
// reported and left out. SANDBOXER_BENCH_N sets the default of -n.
//
// Docker, Podman and containerd are measured in host mode (published
// 127.0.0.1 ports); kubernetes in network mode (bench.ModeFor: a cluster
// publishes nothing on the host), on a namespace's pods
// (SANDBOXER_K8S_NAMESPACE), with as many sandboxes at once as a 2-core
// test node fits (atOnce).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/roboco/sandboxer/bench"
	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	// The driver measures every runtime the CLI links.
	_ "github.com/roboco/sandboxer/engines/all"
	_ "github.com/roboco/sandboxer/runtime/all"
	"github.com/roboco/sandboxer/runtime/detect"
)

// backend is one runtime the driver measures, connected through runtime
// detection as the CLI's --runtime connects, with the driver's settings
// for it.
type backend struct {
	name string
	// floor, when set, is the runtime's own API at the endpoint detection
	// chose (default: bench.AdapterFloor, the adapter itself).
	floor func(endpoint string) (bench.Floor, error)
	// atOnce, when not zero, caps how many sandboxes the row runs at once
	// (the owners and the real sweeps), and why says why.
	atOnce int
	why    string
	// optIn, when set, says whether "all" includes the backend (the
	// others always are, and left out when they do not answer).
	optIn func() bool
	// cli, when set, gives the flags that pin the sandboxer CLI to the
	// endpoint detection chose, and the runtime's own CLI aimed at it,
	// for the CLI part (bench.PartCLI).
	cli func(endpoint string) (flags, own []string)
}

// k8sAtOnce is how many sandbox pods at once fit the test cluster's node
// beside another test's: each pod requests a tenth of its CPU limit
// (provision.DefaultCPUs, 1 CPU: 100m; runtime/kubernetes), so 20 would
// ask the whole 2000m of a 2-core node and the kubelet would refuse a pod
// (OutOfcpu) as soon as anything else ran there; 16 leave 400m.
const k8sAtOnce = 16

// settings are the driver's own settings of some runtimes.
var settings = map[string]backend{
	detect.Docker: {floor: func(endpoint string) (bench.Floor, error) { return bench.NewDockerFloor(endpoint) },
		cli: func(endpoint string) ([]string, []string) {
			return []string{"--runtime", detect.Docker, "--docker-host", endpoint}, []string{"docker", "--host", endpoint}
		}},
	detect.Podman: {cli: func(endpoint string) ([]string, []string) {
		return []string{"--runtime", detect.Podman, "--container-host", endpoint}, []string{"podman", "--url", endpoint}
	}},
	detect.Kubernetes: {atOnce: k8sAtOnce,
		why:   "each sandbox pod requests 100m CPU, and 20 would ask all 2000m of the 2-core test node (the kubelet refuses a pod past that: OutOfcpu)",
		optIn: func() bool { return os.Getenv("KUBECONFIG") != "" }},
}

// backends are the runtimes the driver knows, in the order they run:
// every runtime detection can choose (detect.Choosable).
var backends = func() []backend {
	var out []backend
	for _, name := range detect.Choosable() {
		b := settings[name]
		b.name = name
		out = append(out, b)
	}
	return out
}()

func main() {
	testenv.Load()
	defN := 10
	if v := os.Getenv("SANDBOXER_BENCH_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "sandboxer-bench: SANDBOXER_BENCH_N=%q is not a positive integer\n", v)
			os.Exit(2)
		}
		defN = n
	}
	var (
		runtimes     = flag.String("runtime", "all", "runtimes to measure, comma-separated (docker, podman, containerd, kubernetes), or all (kubernetes when KUBECONFIG is set)")
		rounds       = flag.Int("n", defN, "rounds of the provisioning figures (env SANDBOXER_BENCH_N)")
		owners       = flag.Int("owners", 20, "owners provisioning -owners-engine at once")
		ownersEngine = flag.String("owners-engine", "", "engine the owners provision at once (default: the registry's first, postgres)")
		sweepEngine  = flag.String("sweep-engine", "", "engine of the real sandboxes swept (default: the one quickest to be ready, redis)")
		ownersRounds = flag.Int("owners-rounds", 1, "rounds of the owners-at-once figure")
		sweep        = flag.Int("sweep", 50, "real sandboxes per janitor sweep")
		sweepRounds  = flag.Int("sweep-rounds", 5, "rounds of the real janitor sweeps")
		fake         = flag.Int("fake", 1000, "sandboxes per janitor sweep on the fake runtime")
		imageChecks  = flag.Int("image-checks", 100, "image-present checks")
		out          = flag.String("out", filepath.Join("bench", "results"), "directory for <runtime>.md and .json")
		timeout      = flag.Duration("timeout", 40*time.Minute, "deadline of the whole run")
		verbose      = flag.Bool("v", false, "debug progress")
		only         = flag.String("only", "", "measure only these parts, comma-separated ("+strings.Join(bench.Parts, ", ")+"); the others' figures stay empty, so write them elsewhere with -out (default: every part)")
		sandboxer    = flag.String("sandboxer", "", "the sandboxer binary the CLI part runs (default: built from ./cmd/sandboxer into a temporary directory)")
		readiness    = flag.String("readiness", "auto", "how sandboxes are judged ready: auto (over the wire in host mode), wire or exec (the exec probe fallback; write it elsewhere with -out)")
	)
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	chosen, explicit, err := choose(*runtimes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxer-bench:", err)
		os.Exit(2)
	}
	images, err := imageRefs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxer-bench:", err)
		os.Exit(2)
	}

	mode, err := provision.ParseReadiness(*readiness)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxer-bench:", err)
		os.Exit(2)
	}
	var parts []string
	if *only != "" {
		for _, part := range strings.Split(*only, ",") {
			parts = append(parts, strings.TrimSpace(part))
		}
	}
	cliBinary, cleanupCLI, err := cliBinary(ctx, *sandboxer, parts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxer-bench:", err)
		os.Exit(2)
	}
	defer cleanupCLI()
	failed := false
	for _, b := range chosen {
		suite := &bench.Suite{
			Images: images, Rounds: *rounds, Owners: *owners, OwnersRounds: *ownersRounds, OwnersEngine: *ownersEngine,
			RealSweep: *sweep, SweepRounds: *sweepRounds, SweepEngine: *sweepEngine, FakeSweep: *fake, ImageChecks: *imageChecks,
			Logger: logger.With("runtime", b.name), Readiness: mode, Only: parts,
		}
		b.capAtOnce(suite)
		rep, err := measure(ctx, b, suite, cliBinary)
		if errors.Is(err, runtime.ErrUnavailable) && !explicit {
			logger.Warn("runtime does not answer: left out", "runtime", b.name, "error", err)
			continue
		}
		if err != nil {
			logger.Error("bench failed", "runtime", b.name, "error", err)
			failed = true
			continue
		}
		if err := write(*out, rep); err != nil {
			logger.Error("write results", "error", err)
			failed = true
		}
		fmt.Printf("\n## %s %s (%d rounds, %s)\n\n%s", rep.Runtime, rep.Version, rep.Rounds,
			time.Duration(rep.ElapsedSeconds*float64(time.Second)).Round(time.Second), rep.Table())
		for _, e := range rep.Errors {
			fmt.Println("error:", e)
		}
	}
	if failed {
		cleanupCLI()
		os.Exit(1)
	}
}

// cliBinary is the sandboxer binary the CLI part runs: path when given,
// else one built now from ./cmd/sandboxer ("" when the run leaves the CLI
// part out); cleanup removes what it built.
func cliBinary(ctx context.Context, path string, parts []string) (string, func(), error) {
	if path != "" || (len(parts) > 0 && !slices.Contains(parts, bench.PartCLI)) {
		return path, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "sandboxer-bench-cli-")
	if err != nil {
		return "", nil, err
	}
	out := filepath.Join(dir, "sandboxer")
	build := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/sandboxer")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build the CLI for the CLI part (run from the repository's root, or give -sandboxer): %w", err)
	}
	return out, func() { os.RemoveAll(dir) }, nil
}

// capAtOnce lowers the suite's sandboxes at once to the backend's cap,
// and says so in the report's header.
func (b backend) capAtOnce(s *bench.Suite) {
	if b.atOnce <= 0 || (s.Owners <= b.atOnce && s.RealSweep <= b.atOnce) {
		return
	}
	s.Notes = append(s.Notes, fmt.Sprintf("owners at once %d (asked %d), real sweeps of %d (asked %d): %s",
		min(s.Owners, b.atOnce), s.Owners, min(s.RealSweep, b.atOnce), s.RealSweep, b.why))
	s.Owners, s.RealSweep = min(s.Owners, b.atOnce), min(s.RealSweep, b.atOnce)
}

// choose resolves -runtime into backends; explicit says whether they were
// named (and so must answer).
func choose(list string) ([]backend, bool, error) {
	return chooseFrom(backends, list)
}

// chooseFrom is choose over a list of backends: "all" (or nothing) is
// every backend that is not opt-in, and each opt-in one whose optIn holds.
func chooseFrom(backends []backend, list string) ([]backend, bool, error) {
	if list == "" || list == "all" {
		var out []backend
		for _, b := range backends {
			if b.optIn == nil || b.optIn() {
				out = append(out, b)
			}
		}
		return out, false, nil
	}
	var out []backend
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, b := range backends {
			if b.name == name {
				out = append(out, b)
				found = true
			}
		}
		if !found {
			return nil, false, fmt.Errorf("unknown runtime %q (docker, podman, containerd, kubernetes, all)", name)
		}
	}
	return out, true, nil
}

// imageRefs reads every engine's image and the busybox stand-in from the
// environment (build/images.env): the bench never falls back to an
// upstream image, which this host may not be able to pull.
func imageRefs() (map[string]string, error) {
	images := map[string]string{}
	var missing []string
	for _, name := range append(engines.Default.Names(), "busybox") {
		key := "SANDBOXER_IMAGE_" + strings.ToUpper(name)
		if ref := os.Getenv(key); ref != "" {
			images[name] = ref
		} else {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s not set (run `make env`, which writes build/images.env)", strings.Join(missing, ", "))
	}
	return images, nil
}

func measure(ctx context.Context, b backend, s *bench.Suite, cliBinary string) (*bench.Report, error) {
	sel, err := detect.Detect(ctx, detect.Options{Runtime: b.name, Logger: s.Logger})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.name, err)
	}
	rt := sel.Runtime
	defer rt.Close()
	var floor bench.Floor = bench.AdapterFloor{RT: rt}
	if b.floor != nil {
		if floor, err = b.floor(sel.Chosen.Endpoint); err != nil {
			return nil, fmt.Errorf("%s: floor: %w", b.name, err)
		}
	}
	defer floor.Close()
	s.RT, s.Floor = rt, floor
	if b.cli != nil && cliBinary != "" {
		flags, own := b.cli(sel.Chosen.Endpoint)
		s.CLI, s.OwnCLI = append([]string{cliBinary}, flags...), own
	}
	return s.Run(ctx)
}

func write(dir string, rep *bench.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for ext, render := range map[string]func(*os.File) error{
		".md":   func(f *os.File) error { return rep.WriteMarkdown(f) },
		".json": func(f *os.File) error { return rep.WriteJSON(f) },
	} {
		f, err := os.Create(filepath.Join(dir, rep.Runtime+ext))
		if err != nil {
			return err
		}
		if err := render(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
