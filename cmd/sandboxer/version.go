package main

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what `sandboxer version` reports, read from the build
// info the Go toolchain embeds in the binary.
type versionInfo struct {
	// Module is the main module's path and Version its version: a tag
	// ("v1.2.0"), a pseudo-version derived from the VCS, or "(devel)".
	Module  string `json:"module"`
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from, Time its
	// commit time, Modified whether the work tree had changes; empty when
	// the build recorded no VCS information (-buildvcs=false).
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Go is the toolchain's version, Platform GOOS/GOARCH, CGO whether
	// cgo was enabled.
	Go       string `json:"go"`
	Platform string `json:"platform"`
	CGO      bool   `json:"cgo"`
}

// readVersion reads bi (debug.ReadBuildInfo); ok false (a binary built
// without module support) leaves only the Go version and platform.
func readVersion(bi *debug.BuildInfo, ok bool) (v versionInfo) {
	goos, goarch := goruntime.GOOS, goruntime.GOARCH
	v = versionInfo{Version: "unknown", Go: goruntime.Version()}
	defer func() { v.Platform = goos + "/" + goarch }()
	if !ok || bi == nil {
		return v
	}
	v.Module, v.Version, v.Go = bi.Main.Path, bi.Main.Version, bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		case "CGO_ENABLED":
			v.CGO = s.Value == "1"
		}
	}
	return v
}

// String is the one line `sandboxer version` prints.
func (v versionInfo) String() string {
	s := "sandboxer " + v.Version
	if v.Revision != "" {
		s += " (revision " + v.Revision
		if v.Modified {
			s += ", modified"
		}
		if v.Time != "" {
			s += ", " + v.Time
		}
		s += ")"
	}
	return s + fmt.Sprintf(" %s %s", v.Go, v.Platform)
}

func (a *app) versionCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version [--format text|json]",
		Short: "Print this binary's version, VCS revision and Go version (from its build info)",
		Long: `Print the module version, the VCS revision (and whether the work tree was
modified), the Go version and the platform this binary was built with, as
the Go toolchain recorded them in it (runtime/debug.ReadBuildInfo). It
contacts no runtime.`,
		Args: cobra.NoArgs,
		RunE: a.command(func(*cobra.Command, []string) error {
			v := readVersion(debug.ReadBuildInfo())
			switch format {
			case "json":
				return writeJSON(a.io.Out, v)
			case "text":
				_, err := fmt.Fprintln(a.io.Out, v)
				return err
			}
			return usagef("--format %q: want text or json", format)
		}),
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}
