package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// teardownTimeout bounds a teardown that runs after the command's context
// has ended (Ctrl-C, CMD finished).
const teardownTimeout = 60 * time.Second

// provisionFlags are the flags up and run share.
type provisionFlags struct {
	owner         string
	ownerTemplate string
	services      []string
	readyTimeout  time.Duration
	pullTimeout   time.Duration
}

func (pf *provisionFlags) add(cmd *cobra.Command, reg *engines.Registry, ownerHelp string) {
	cmd.Flags().StringSliceVarP(&pf.services, "services", "s", nil, "services to provision, comma-separated: "+strings.Join(reg.Names(), ", "))
	pf.addOwnerAndDeadlines(cmd, ownerHelp)
}

// addOwnerAndDeadlines adds the flags but --services (spawn reads its list
// as JSON).
func (pf *provisionFlags) addOwnerAndDeadlines(cmd *cobra.Command, ownerHelp string) {
	f := cmd.Flags()
	ownerFlags(f, &pf.owner, &pf.ownerTemplate, ownerHelp)
	f.DurationVar(&pf.readyTimeout, "ready-timeout", 0, "readiness deadline per service (default: each engine's own)")
	f.DurationVar(&pf.pullTimeout, "pull-timeout", provision.DefaultPullTimeout, "deadline of each image pull")
}

// options checks the flags and returns the provisioner options and the
// service list; nothing is contacted.
func (pf *provisionFlags) options(a *app, ownerID string) (provision.Options, []string, error) {
	opts, err := pf.optionsFor(a, ownerID)
	if err != nil {
		return provision.Options{}, nil, err
	}
	services := provision.ParseServices(strings.Join(pf.services, ","))
	if _, err := provision.ValidateServices(a.registry, services); err != nil {
		return provision.Options{}, nil, err
	}
	return opts, services, nil
}

// optionsFor checks the flags but the service list, and the owner id
// under the label prefix, and returns the provisioner options; nothing is
// contacted.
func (pf *provisionFlags) optionsFor(a *app, ownerID string) (provision.Options, error) {
	if err := durationFlag("ready-timeout", pf.readyTimeout); err != nil {
		return provision.Options{}, err
	}
	if err := durationFlag("pull-timeout", pf.pullTimeout); err != nil {
		return provision.Options{}, err
	}
	opts := a.provisionOptions()
	opts.OwnerTemplate = pf.ownerTemplate
	opts.ReadyTimeout = pf.readyTimeout
	opts.PullTimeout = pf.pullTimeout
	if err := opts.Validate(); err != nil {
		return provision.Options{}, err
	}
	if err := opts.ValidateOwnerID(ownerID); err != nil {
		return provision.Options{}, err
	}
	return opts, nil
}

// provision provisions on rt with pull progress on stderr.
func (a *app) provision(ctx context.Context, rt runtime.ContainerRuntime, opts provision.Options, ownerID string, services []string) (*provision.Provisioner, provision.Sandbox, error) {
	if !a.quiet {
		pr := newPulls(a.console, a.log)
		opts.OnEvent = pr.event
		defer pr.done()
	}
	p, err := provision.New(rt, opts)
	if err != nil {
		return nil, provision.Sandbox{}, err
	}
	sb, err := p.Provision(ctx, ownerID, services)
	return p, sb, err
}

func (a *app) upCmd() *cobra.Command {
	var (
		pf      provisionFlags
		network string
		publish bool
		private bool
		format  string
		envFile string
	)
	cmd := &cobra.Command{
		Use:   "up --owner ID --services LIST [--private | --network NAME | --publish] [--format dotenv|shell|json] [--env-file PATH]",
		Short: "Provision sandboxes for an owner and print their env",
		Long: `Provision one sandbox per service for owner ID and print the env consumers
read (dotenv by default; shell: export K='v' lines; json: owner, adopted_by
when the owner existed already and the runtime adopts (Kubernetes),
network, containers with names, ids and endpoints, and env). The dotenv
and shell output end with SANDBOXER_NETWORK=<the network the sandboxes
joined>.

The sandboxes are named <label-prefix>-sandbox-<engine>-ID and owned by the
container <label-prefix>-agent-ID (--owner-template): the janitor removes
them once that container is gone. They join the owner's own network,
sbx-<owner> (made with the owner's first sandbox, removed with its last),
which no other container is on:
  --publish (the default): a plain network; their ports are published on
    127.0.0.1 and the env hands out those.
  --private: an internal network (no route out, nothing published); the env
    hands out their addresses on it, and the agent joins it
    (docker network connect <network> <agent>, or docker run --network).
  --network NAME: they join the caller's network NAME instead (no owner
    network), and anyone on NAME reaches them.

On failure nothing of this call is left running and the exit code says why
(2 usage, 3 runtime unavailable, 4 provisioning failed).`,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if pf.owner == "" {
				return usagef("--owner is required")
			}
			f := provision.Format(format)
			switch f {
			case provision.FormatDotenv, provision.FormatShell, provision.FormatJSON:
			default:
				return usagef("--format %q: want dotenv, shell or json", format)
			}
			opts, services, err := pf.options(a, pf.owner)
			if err != nil {
				return err
			}
			opts.Network = network
			opts.Private = private

			var out *envFileWriter
			if envFile != "" {
				if out, err = newEnvFile(envFile); err != nil {
					return err
				}
				defer out.Abort()
			}

			ctx := cmd.Context()
			rt, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			p, sb, err := a.provision(ctx, rt, opts, pf.owner, services)
			if err != nil {
				return err
			}

			var buf bytes.Buffer
			err = sb.Render(&buf, f)
			if err == nil && out != nil {
				err = out.Commit(buf.Bytes())
				if err == nil {
					a.log.Info("env written", "path", envFile, "owner", sb.Owner)
				}
			} else if err == nil {
				_, err = a.io.Out.Write(buf.Bytes())
			}
			if err != nil {
				return unwritten(ctx, p, "up", sb, err)
			}
			return nil
		}),
	}
	pf.add(cmd, a.registry, "owner id: the agent's id (required)")
	f := cmd.Flags()
	f.StringVar(&network, "network", "", "sibling mode: join this network and hand out addresses on it")
	f.BoolVar(&publish, "publish", false, "host mode (the default): publish ports on 127.0.0.1")
	f.BoolVar(&private, "private", false, "private network mode: join the owner's internal network, publish nothing; attach the agent to the network the output names")
	f.StringVarP(&format, "format", "o", "dotenv", "env output: dotenv, shell or json")
	f.StringVar(&envFile, "env-file", "", "write the env to this file (mode 0600) instead of stdout")
	cmd.MarkFlagsMutuallyExclusive("network", "publish", "private")
	return cmd
}

// envFileWriter writes an env file atomically with mode 0600: a temporary
// file next to it, renamed over it once complete. It is created before
// provisioning so that an unwritable path fails before anything starts.
type envFileWriter struct {
	path string
	tmp  *os.File
	// committed: Commit moved the file into place.
	committed bool
}

func newEnvFile(path string) (*envFileWriter, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("--env-file %s: %w", path, err)
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return nil, usagef("--env-file %s: is a directory", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("--env-file %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("--env-file %s: %w", path, err)
	}
	return &envFileWriter{path: abs, tmp: tmp}, nil
}

// Commit writes data and moves the file into place.
func (w *envFileWriter) Commit(data []byte) error {
	if _, err := w.tmp.Write(data); err != nil {
		return err
	}
	if err := w.tmp.Sync(); err != nil {
		return err
	}
	if err := w.tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(w.tmp.Name(), w.path); err != nil {
		return err
	}
	w.tmp, w.committed = nil, true
	return nil
}

// Abort removes the temporary file unless Commit succeeded.
func (w *envFileWriter) Abort() {
	if w.tmp != nil {
		w.tmp.Close()
		os.Remove(w.tmp.Name())
		w.tmp = nil
	}
}

// Discard undoes the writer for a command that failed after all: it
// removes the temporary file, or the file Commit moved into place, so
// that no env file is left for sandboxes that were torn down (or for a
// report that says the call failed).
func (w *envFileWriter) Discard() {
	w.Abort()
	if w.committed {
		os.Remove(w.path)
		w.committed = false
	}
}

// unwritten tears the sandboxes this call made down after their env or
// report could not be written: nobody could read the credentials, so
// nothing of the call may be left behind. What earlier calls made for the
// same owner (a live agent's) stays. It returns the write error, with the
// teardown's if that failed too.
func unwritten(ctx context.Context, p *provision.Provisioner, verb string, sb provision.Sandbox, werr error) error {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	_, terr := p.TeardownSandbox(tctx, sb)
	return errors.Join(fmt.Errorf("%s %s: write env: %w (sandboxes torn down)", verb, sb.Owner, werr), terr)
}
