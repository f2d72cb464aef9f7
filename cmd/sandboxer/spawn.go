package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/provision"
)

// Spawn statuses: what `spawn` did, in its report's "status".
const (
	// spawnProvisioned: the sandboxes are ready and their env handed out.
	spawnProvisioned = "provisioned"
	// spawnNotParticipating: the switch is off or the project lists no
	// services; nothing was created, the env is empty.
	spawnNotParticipating = "not_participating"
	// spawnFailed: nothing of the call is left; "error" says why.
	spawnFailed = "failed"
)

// spawnReport is spawn's one JSON object on stdout, whatever the outcome.
type spawnReport struct {
	// Status is provisioned, not_participating or failed.
	Status string `json:"status"`
	// Reason says why a spawn does not participate: switch_off or
	// no_services.
	Reason provision.NotParticipating `json:"reason,omitempty"`
	// Switch is the master switch's name and Enabled what it said (false
	// when unset or unreadable).
	Switch  string `json:"switch"`
	Enabled bool   `json:"enabled"`
	// Services is the project's list as given (null when it has none or
	// could not be read).
	Services []string `json:"services"`
	OwnerID  string   `json:"owner_id"`
	// Owner is the owner container's name, which the agent's container
	// must carry (--owner-template).
	Owner string `json:"owner,omitempty"`
	// AdoptedBy is the owner whose deletion makes the runtime itself
	// remove the sandboxes (provision.Sandbox.AdoptedBy): set when the
	// owner existed already and the runtime adopts (Kubernetes).
	AdoptedBy string `json:"adopted_by,omitempty"`
	// Network is the network the sandboxes joined (provision.Sandbox.
	// Network): with --private, the one to attach the agent to.
	Network    string                `json:"network,omitempty"`
	Containers []provision.Container `json:"containers"`
	// EnvFile is where the env was written (--env-file; an empty file when
	// not participating); Env is the env itself when there is no file.
	EnvFile string    `json:"env_file,omitempty"`
	Env     []jsonVar `json:"env,omitempty"`
	// Error is set when Status is failed.
	Error *spawnError `json:"error,omitempty"`
}

// spawnError is why a spawn failed: the stderr line, and the exit code.
type spawnError struct {
	Message  string `json:"message"`
	ExitCode int    `json:"exit_code"`
}

// jsonVar is one env variable in JSON output.
type jsonVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func (a *app) spawnCmd() *cobra.Command {
	var (
		pf           provisionFlags
		servicesJSON string
		switchPrefix string
		network      string
		publish      bool
		private      bool
		envFile      string
	)
	cmd := &cobra.Command{
		Use:   "spawn --owner ID --services-json JSON [--private | --network NAME | --publish] [--env-file PATH]",
		Short: "The orchestrator's spawn path: the master switch and the project's list, then provision or do nothing",
		Long: `Do what an orchestrator's spawn path does for agent ID, in one call: read
the master switch ROBOCO_SANDBOX_DB_ENABLED from the environment
(<--switch-prefix>_SANDBOX_DB_ENABLED; unset or empty: off; 1, true, yes, on
/ 0, false, no, off) and the project's service list as stored, a JSON list
(--services-json '["postgres","redis"]'; null, [] or "" for none). When the
switch is off or the list is empty, nothing is created; otherwise the
sandboxes are provisioned as by up.

stdout carries one JSON object whatever the outcome:
  {"status": "provisioned" | "not_participating" | "failed",
   "reason": "switch_off" | "no_services"   (not_participating),
   "switch", "enabled", "services", "owner_id", "owner",
   "adopted_by"   (when the owner existed and the runtime adopts: Kubernetes),
   "network"      (the network the sandboxes joined: with --private, the
                   owner's internal network, to attach the agent to),
   "containers": [{"name", "id", "engine", "image", "endpoint": {"host", "port"}}],
   "env_file" (with --env-file) or "env": [{"name", "value"}] (without),
   "error": {"message", "exit_code"}         (failed)}

Exit codes: 0 for provisioned and for not_participating (tell them apart by
"status"), else as up's: 2 usage or bad input (a bad switch value, a list
that is not a JSON list or names an unknown service, a bad owner id; nothing
contacted), 3 runtime unavailable, 4 provisioning failed (rolled back), 1
the env could not be written (torn down).

A project that lists no services never fails for the switch's value. A list
is not checked while the switch is off (a warning says what is wrong with
it): check it when the project is configured, with
` + "`sandboxer engines --check JSON`" + `.

--env-file PATH writes the env as dotenv (for docker run --env-file), mode
0600, and an empty file when not participating, so that the agent's
docker run is the same command either way. --private, --network and
--publish choose the network as for up.`,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			rep := spawnReport{OwnerID: pf.owner, Containers: []provision.Container{}}
			err := a.spawn(cmd.Context(), &rep, &pf, servicesJSON, switchPrefix, network, private, envFile)
			if err != nil {
				rep.Status, rep.Reason, rep.AdoptedBy, rep.Network, rep.Containers, rep.Env, rep.EnvFile = spawnFailed, "", "", "", []provision.Container{}, nil, ""
				rep.Error = &spawnError{Message: oneLine(err.Error()), ExitCode: exitCode(err, a.sigs.signal())}
				_ = writeJSON(a.io.Out, rep) // the error is what counts
			}
			return err
		}),
	}
	pf.addOwnerAndDeadlines(cmd, "owner id: the agent's id (required)")
	f := cmd.Flags()
	f.StringVar(&servicesJSON, "services-json", "", `the project's service list as a JSON list ('["postgres","redis"]'; null, [] or empty: none)`)
	f.StringVar(&switchPrefix, "switch-prefix", provision.DefaultSwitchPrefix, "the master switch is <prefix>_SANDBOX_DB_ENABLED")
	f.StringVar(&network, "network", "", "sibling mode: join this network and hand out addresses on it")
	f.BoolVar(&publish, "publish", false, "host mode (the default): publish ports on 127.0.0.1")
	f.BoolVar(&private, "private", false, "private network mode: join the owner's internal network, publish nothing; attach the agent to the report's network")
	f.StringVar(&envFile, "env-file", "", "write the env as dotenv to this file (mode 0600; empty when not participating) instead of into the report")
	cmd.MarkFlagsMutuallyExclusive("network", "publish", "private")
	return cmd
}

// spawn fills rep: the gate, then (when it is active) provisioning and the
// env, and writes it. It returns the command's error, and then has
// written nothing, no env file included (one may have been committed
// before the report could not be written: it is removed); the caller
// reports the failure.
func (a *app) spawn(ctx context.Context, rep *spawnReport, pf *provisionFlags, servicesJSON, switchPrefix, network string, private bool, envFile string) (err error) {
	var out *envFileWriter
	defer func() {
		if out != nil && err != nil {
			out.Discard()
		}
	}()
	if pf.owner == "" {
		return usagef("--owner is required")
	}
	name, err := provision.SwitchName(switchPrefix)
	if err != nil {
		return &usageError{err}
	}
	rep.Switch = name
	g, err := provision.GateFromEnv(a.getenv, name, a.registry, servicesJSON)
	rep.Enabled, rep.Services = g.Enabled, g.Services
	if err != nil {
		return err
	}
	if why := g.Why(); why != "" {
		if g.Unchecked != nil {
			a.log.Warn("the project's service list is invalid; spawns will fail once the switch is on", "error", g.Unchecked)
		}
		rep.Status, rep.Reason = spawnNotParticipating, why
		if envFile != "" {
			if out, err = newEnvFile(envFile); err != nil {
				return err
			}
			defer out.Abort()
			if err := out.Commit(nil); err != nil {
				return fmt.Errorf("spawn: write env file %s: %w", envFile, err)
			}
			rep.EnvFile = out.path
		}
		a.log.Info("spawn not participating", "owner_id", pf.owner, "reason", string(why), "switch", name)
		if err := writeJSON(a.io.Out, rep); err != nil {
			return fmt.Errorf("spawn: write report: %w", err)
		}
		return nil
	}
	opts, err := pf.optionsFor(a, pf.owner)
	if err != nil {
		return err
	}
	opts.Network = network
	opts.Private = private
	rep.Owner = opts.OwnerName(pf.owner)

	if envFile != "" {
		if out, err = newEnvFile(envFile); err != nil {
			return err
		}
		defer out.Abort()
	}
	rt, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	p, sb, err := a.provision(ctx, rt, opts, pf.owner, g.Services)
	if err != nil {
		return err
	}
	var werr error
	if out != nil {
		var buf bytes.Buffer
		werr = sb.Render(&buf, provision.FormatDotenv)
		if werr == nil {
			werr = out.Commit(buf.Bytes())
		}
		if werr == nil {
			rep.EnvFile = out.path
			a.log.Info("env written", "path", envFile, "owner", sb.Owner)
		}
	} else {
		for _, v := range sb.Env {
			rep.Env = append(rep.Env, jsonVar{Name: v.Name, Value: v.Value})
		}
	}
	rep.Status, rep.Containers, rep.AdoptedBy, rep.Network = spawnProvisioned, sb.Containers, sb.AdoptedBy, sb.Network
	if werr == nil {
		werr = writeJSON(a.io.Out, rep)
	}
	if werr != nil {
		return unwritten(ctx, p, "spawn", sb, werr)
	}
	return nil
}
