// Command sandboxer-bench is the end-to-end benchmark driver behind
// `make bench`. For each runtime asked for (every landed adapter by
// default) that answers, it runs the bench suite with the stand-in images
// of build/images.env (or SANDBOXER_IMAGE_*), writes
// bench/results/<runtime>.md and .json, and prints the table.
//
// Usage:
//
//	go run ./bench/cmd/sandboxer-bench [-runtime docker,podman,containerd] [-n 5] [-out bench/results] [-only engines,trio]
//
// A runtime named explicitly with -runtime must answer (exit status 1
// otherwise); with the default, "all", runtimes that do not answer are
// reported and left out. SANDBOXER_BENCH_N sets the default of -n.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/roboco/sandboxer/bench"
	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/containerd"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/runtime/podman"
)

// backend connects to one runtime and to its floor (its own API).
type backend struct {
	name    string
	connect func() (runtime.ContainerRuntime, bench.Floor, error)
}

// backends are the runtimes the driver knows, in the order they run.
var backends = []backend{
	{name: docker.Name, connect: func() (runtime.ContainerRuntime, bench.Floor, error) {
		rt, err := docker.New()
		if err != nil {
			return nil, nil, err
		}
		floor, err := bench.NewDockerFloor(os.Getenv("DOCKER_HOST"))
		if err != nil {
			rt.Close()
			return nil, nil, err
		}
		return rt, floor, nil
	}},
	{name: podman.Name, connect: func() (runtime.ContainerRuntime, bench.Floor, error) {
		rt, err := podman.New()
		if err != nil {
			return nil, nil, err
		}
		return rt, bench.AdapterFloor{RT: rt}, nil
	}},
	{name: containerd.Name, connect: func() (runtime.ContainerRuntime, bench.Floor, error) {
		var opts []containerd.Option
		if reg := os.Getenv("SANDBOXER_REGISTRY"); reg != "" {
			opts = append(opts, containerd.WithInsecureRegistries(reg))
		}
		rt, err := containerd.New(opts...)
		if err != nil {
			return nil, nil, err
		}
		return rt, bench.AdapterFloor{RT: rt}, nil
	}},
}

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
		runtimes     = flag.String("runtime", "all", "runtimes to measure, comma-separated (docker, podman, containerd), or all")
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
	failed := false
	for _, b := range chosen {
		suite := &bench.Suite{
			Images: images, Rounds: *rounds, Owners: *owners, OwnersRounds: *ownersRounds, OwnersEngine: *ownersEngine,
			RealSweep: *sweep, SweepRounds: *sweepRounds, SweepEngine: *sweepEngine, FakeSweep: *fake, ImageChecks: *imageChecks,
			Logger: logger.With("runtime", b.name), Readiness: mode, Only: parts,
		}
		rep, err := measure(ctx, b, suite)
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
		os.Exit(1)
	}
}

// choose resolves -runtime into backends; explicit says whether they were
// named (and so must answer).
func choose(list string) ([]backend, bool, error) {
	if list == "" || list == "all" {
		return backends, false, nil
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
			return nil, false, fmt.Errorf("unknown runtime %q (docker, podman, containerd, all)", name)
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

func measure(ctx context.Context, b backend, s *bench.Suite) (*bench.Report, error) {
	rt, floor, err := b.connect()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.name, err)
	}
	defer rt.Close()
	defer floor.Close()
	s.RT, s.Floor = rt, floor
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
