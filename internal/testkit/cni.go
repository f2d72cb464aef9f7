package testkit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
)

// cniPlugins are the plugins the containerd adapter's networks use.
var cniPlugins = []string{"bridge", "host-local", "portmap", "firewall", "loopback"}

// CNIPluginDirWith makes a CNI plugin directory of the host's plugins
// (found in dirs, the first that has each) in which plugin is a shell
// script: script's lines, then the real plugin for whatever they did not
// end (a failure injected into ADD must leave DEL working, or libcni stops
// the DEL of the whole list at the broken plugin). A plugin missing from
// dirs ends the test through testenv.Unavailable for containerd.
func CNIPluginDirWith(t testing.TB, dirs []string, plugin, script string) string {
	t.Helper()
	find := func(name string) string {
		for _, dir := range dirs {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p
			}
		}
		testenv.Unavailable(t, "containerd", "CNI plugin %s in none of %q", name, dirs)
		return ""
	}
	dir := t.TempDir()
	for _, name := range cniPlugins {
		if name != plugin {
			require.NoError(t, os.Symlink(find(name), filepath.Join(dir, name)))
		}
	}
	wrapper := fmt.Sprintf("#!/bin/sh\n%s\nexec %s \"$@\"\n", script, find(plugin))
	require.NoError(t, os.WriteFile(filepath.Join(dir, plugin), []byte(wrapper), 0o755))
	return dir
}

// CNIFailOn is a line of a CNIPluginDirWith script that fails the CNI
// command cmd ("ADD", "DEL") the way a plugin does: an error object on
// stdout, exit status 1.
func CNIFailOn(cmd string) string {
	return fmt.Sprintf(`if [ "$CNI_COMMAND" = %s ]; then echo '{"cniVersion":"1.0.0","code":999,"msg":"injected failure"}'; exit 1; fi`, cmd)
}

// HostLocalAddresses lists the addresses that CNI's host-local IPAM holds
// in the directory of one network (a file per address, beside its lock
// and last_reserved_ip files); none when the directory does not exist.
func HostLocalAddresses(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var ips []string
	for _, e := range entries {
		if e.Name() != "lock" && !strings.HasPrefix(e.Name(), "last_reserved_ip") {
			ips = append(ips, e.Name())
		}
	}
	return ips
}
