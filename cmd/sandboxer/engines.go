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

func (a *app) enginesCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "engines [--format table|json]",
		Short: "List the engine registry: name, image, port, tmpfs, probe, env names",
		Long: `List the engines sandboxer can provision (the registry is the only list of
valid service names): image in effect (default, SANDBOXER_IMAGE_<ENGINE> or
--image), container port, tmpfs paths, readiness probe (run inside the
sandbox) with its deadline, and the env variables it emits (--env-prefix).`,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if err := a.provisionOptions().Validate(); err != nil {
				return err
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
	return cmd
}
