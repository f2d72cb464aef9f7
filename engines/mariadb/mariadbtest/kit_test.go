package mariadbtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/mariadb"
	"github.com/roboco/sandboxer/engines/mariadb/mariadbtest"
)

// TestCLILoginTakesTheURLApart: the shell line hands the mariadb client
// the host, port, user and database of the emitted URL, over TCP, and the
// password in MYSQL_PWD, never in argv (a stand-in client on PATH prints
// what it got; the real one's login is the suites').
func TestCLILoginTakesTheURLApart(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err, "the start script runs under sh, as in the image")
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "mariadb"), []byte("#!/bin/sh\necho \"pwd=$MYSQL_PWD\"\nfor a; do echo \"$a\"; done\n"), 0o755))
	const pw = "0123456789abcdef0123456789abcdef"
	for _, db := range []string{"sandbox", "t_7"} {
		t.Run(db, func(t *testing.T) {
			v, ok := engines.URLVar(mariadb.Engine{}.Env("P", engines.Endpoint{Host: "10.88.0.4", Port: 3306}, engines.Credentials{User: "sandbox", Password: pw, Database: db}))
			require.True(t, ok)
			script, want := mariadbtest.Kit{}.CLILogin()
			assert.Equal(t, "42", want)
			cmd := exec.Command(sh, "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "URL="+v.Value)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			assert.Equal(t, "pwd="+pw, lines[0])
			argv := strings.Join(lines[1:], " ")
			assert.Equal(t, "--protocol=tcp --skip-ssl -h 10.88.0.4 -P 3306 -u sandbox -D "+db+" --batch --skip-column-names -e select 40 + 2", argv)
			assert.NotContains(t, argv, pw)
		})
	}
}
