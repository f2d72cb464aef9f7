// Package hold is the test of testdata/runshare's test binaries: it takes
// a migrated postgres database from the run's shared sandbox, writes and
// reads a row, says so in a file, and holds the database until told to
// let go.
package hold

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/roboco/sandboxer/internal/poll"
	_ "github.com/roboco/sandboxer/runtime/containerd" // the containerd row
	"github.com/roboco/sandboxer/runtime/detect"
	"github.com/roboco/sandboxer/sandboxtest"
)

// The environment the parent test sets.
const (
	envDir        = "RUNSHARE_DIR"            // where the ready and release files are
	envName       = "RUNSHARE_NAME"           // this binary's name in them (default: its package's directory)
	envPrefix     = "RUNSHARE_PREFIX"         // the label prefix
	envRuntime    = "RUNSHARE_RUNTIME"        // detect.Options.Runtime
	envHost       = "RUNSHARE_CONTAINER_HOST" // detect.Options.ContainerHost
	envUnenforced = "RUNSHARE_UNENFORCED"     // detect.Options.UnenforcedLimits, when 1
)

var migrations = sandboxtest.MigrateFS(fstest.MapFS{
	"001.sql": {Data: []byte("create table item (id bigint primary key, v text not null)")},
})

// ADatabase is the test: it writes "<container> <database> <pid>" to
// <dir>/<name>.ready once it holds its database, and lets go once
// <dir>/<name>.release exists.
func ADatabase(t *testing.T) {
	dir, name := os.Getenv(envDir), os.Getenv(envName)
	if dir == "" {
		t.Skip("run by sandboxtest's TestSharedAcrossTestBinaries")
	}
	if name == "" {
		// go test runs a test binary in its package's directory.
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		name = filepath.Base(wd)
	}
	opts := sandboxtest.DBOptions{
		Options: sandboxtest.Options{
			LabelPrefix: os.Getenv(envPrefix),
			Detect: detect.Options{
				Runtime: os.Getenv(envRuntime), ContainerHost: os.Getenv(envHost),
				UnenforcedLimits: os.Getenv(envUnenforced) == "1", PingTimeout: 15 * time.Second,
			},
		},
		Migrations: migrations,
	}
	db := sandboxtest.NewDB(t, "postgres", opts)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatalf("connect to %s: %v", db.Name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "insert into item values ($1, $2)", os.Getpid(), name); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "select count(*) from item").Scan(&n); err != nil || n != 1 {
		t.Fatalf("a database of its own holds its one row: %d rows, %v", n, err)
	}

	ready := filepath.Join(dir, name+".ready")
	body := fmt.Sprintf("%s %s %d\n", db.Container, db.Name, os.Getpid())
	if err := os.WriteFile(ready+".tmp", []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ready+".tmp", ready); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(dir, name+".release")
	if err := poll.Until(ctx, 10*time.Minute, 20*time.Millisecond, func() error {
		_, err := os.Stat(release)
		return err
	}); err != nil {
		t.Fatalf("never released: %v", err)
	}
	if err := conn.QueryRow(ctx, "select count(*) from item").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the database is still its own: %d rows, %v", n, err)
	}
}
