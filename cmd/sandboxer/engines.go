package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/provision"
)

// engineInfo is one registry entry as `engines` reports it.
type engineInfo struct {
	Name         string   `json:"name"`
	Short        string   `json:"short"`
	DefaultImage string   `json:"default_image"`
	Image        string   `json:"image"`
	ImageSource  string   `json:"image_source"`
	Port         int      `json:"port"`
	Tmpfs        []string `json:"tmpfs"`
	Probe        []string `json:"probe"`
	ReadySeconds float64  `json:"ready_timeout_seconds"`
	Env          []string `json:"env"`
}

// describeEngines describes the registry with the images in effect.
func (a *app) describeEngines() []engineInfo {
	var out []engineInfo
	for _, e := range a.registry.All() {
		s := e.Spec()
		image, source := s.Image, "default"
		if ref := a.getenv(provision.ImageEnvName(s.Name)); ref != "" {
			image, source = ref, provision.ImageEnvName(s.Name)
		}
		if ref := a.imageMap[s.Name]; ref != "" {
			image, source = ref, "--image"
		}
		ep := engines.Endpoint{Host: "HOST", Port: s.Port}
		cred := engines.Credentials{User: engines.DefaultUser, Database: engines.DefaultDatabase}
		var probe []string
		for _, st := range e.Probe(ep, cred) {
			probe = append(probe, strings.Join(st.Cmd, " "))
		}
		var env []string
		for _, v := range e.Env(a.envPrefix, ep, cred) {
			env = append(env, v.Name)
		}
		out = append(out, engineInfo{
			Name: s.Name, Short: s.Short, DefaultImage: s.Image, Image: image, ImageSource: source,
			Port: s.Port, Tmpfs: s.Tmpfs, Probe: probe, ReadySeconds: s.ReadyTimeout.Seconds(), Env: env,
		})
	}
	return out
}

// checkReport is `engines --check`'s JSON output.
type checkReport struct {
	// Valid: the list can be stored as it is.
	Valid bool `json:"valid"`
	// Services is the list as read (null: none, the project does not
	// participate).
	Services []string `json:"services"`
	// Error says what is wrong (Valid false).
	Error string `json:"error,omitempty"`
}

// checkList is `engines --check`: the project's list on its own, as spawn
// reads it. Exit 0 when valid, 2 when not.
func (a *app) checkList(data, format string) error {
	list, err := provision.CheckServiceList(a.registry, data)
	if format == "json" {
		rep := checkReport{Valid: err == nil, Services: list}
		if err != nil {
			rep.Error = err.Error()
		}
		if werr := writeJSON(a.io.Out, rep); werr != nil {
			return werr
		}
	} else if err == nil {
		if len(list) == 0 {
			fmt.Fprintln(a.io.Out, "ok: no services (the project does not participate)")
		} else {
			fmt.Fprintln(a.io.Out, "ok: "+strings.Join(list, ", "))
		}
	}
	return err
}

func (a *app) enginesCmd() *cobra.Command {
	var format, check string
	cmd := &cobra.Command{
		Use:   "engines [--format table|json] [--check JSON]",
		Short: "List the engine registry: name, image, port, tmpfs, probe, env names",
		Long: `List the engines sandboxer can provision (the registry is the only list of
valid service names): image in effect (default, SANDBOXER_IMAGE_<ENGINE> or
--image), container port, tmpfs paths, readiness probe (run inside the
sandbox) with its deadline, and the env variables it emits (--env-prefix).

--check JSON validates a project's service list as spawn reads it (a JSON
list such as '["postgres","redis"]'; null, [] or "" for none) without
contacting any runtime: exit 0 and "ok: ..." when it can be stored, exit 2
and the error naming the bad entry otherwise (--format json: {"valid",
"services", "error"}). Run it when the project is configured, so that a typo
is caught then, not when the master switch is turned on.`,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if err := a.provisionOptions().Validate(); err != nil {
				return err
			}
			if cmd.Flags().Changed("check") {
				switch format {
				case "table", "text", "json":
				default:
					return usagef("--format %q: want table or json", format)
				}
				return a.checkList(check, format)
			}
			infos := a.describeEngines()
			switch format {
			case "json":
				return writeJSON(a.io.Out, infos)
			case "table":
			default:
				return usagef("--format %q: want table or json", format)
			}
			tw := tabwriter.NewWriter(a.io.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tIMAGE\tPORT\tTMPFS\tPROBE\tDEADLINE\tENV")
			for _, e := range infos {
				image := e.Image
				if e.ImageSource != "default" {
					image += " (" + e.ImageSource + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.Name, image, e.Port, strings.Join(e.Tmpfs, ","),
					strings.Join(e.Probe, "; "), time.Duration(e.ReadySeconds*float64(time.Second)), strings.Join(e.Env, " "))
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().StringVarP(&format, "format", "o", "table", "output: table or json")
	cmd.Flags().StringVar(&check, "check", "", "validate a project's service list (JSON) and exit: 0 valid, 2 invalid")
	return cmd
}
