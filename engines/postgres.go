package engines

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is PostgreSQL, on the official image's contract
// (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB; first start initialises
// through a temporary server on the unix socket only).
type Postgres struct{}

// Spec describes the postgres engine.
func (Postgres) Spec() Spec {
	return Spec{
		Name:         "postgres",
		Short:        "pg",
		Image:        "postgres:16-alpine",
		Port:         5432,
		Tmpfs:        []string{"/var/lib/postgresql/data"},
		ReadyTimeout: 60 * time.Second,
	}
}

// Container turns durability off: a sandbox is thrown away, so fsync and
// full-page writes only cost time.
func (Postgres) Container(cred Credentials) Container {
	return Container{
		Env: map[string]string{
			"POSTGRES_USER":     cred.User,
			"POSTGRES_PASSWORD": cred.Password,
			"POSTGRES_DB":       cred.Database,
		},
		Command: []string{
			"postgres",
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
		},
	}
}

// Probe asks pg_isready over TCP, then logs in with psql and runs a query:
// pg_isready alone can answer before password authentication works.
func (Postgres) Probe(ep Endpoint, cred Credentials) []ProbeStep {
	port := strconv.Itoa(ep.Port)
	return []ProbeStep{
		{
			Cmd:   []string{"pg_isready", "-h", ep.Host, "-p", port, "-U", cred.User, "-d", cred.Database, "-t", "2"},
			Check: ExitZero,
		},
		{
			Cmd: []string{"psql", "-h", ep.Host, "-p", port, "-U", cred.User, "-d", cred.Database,
				"-w", "-X", "-tA", "-c", "select 1"},
			Env:   map[string]string{"PGPASSWORD": cred.Password, "PGCONNECT_TIMEOUT": "2"},
			Check: StdoutIs("1"),
		},
	}
}

// Env emits <P>_DB_HOST, PORT, USER, PASSWORD, NAME, ADMIN_DB and URL.
func (Postgres) Env(prefix string, ep Endpoint, cred Credentials) []EnvVar {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(cred.User, cred.Password),
		Host:     hostPort(ep),
		Path:     "/" + cred.Database,
		RawQuery: "sslmode=disable",
	}
	p := prefix + "_DB_"
	return []EnvVar{
		{Name: p + "HOST", Value: ep.Host},
		{Name: p + "PORT", Value: strconv.Itoa(ep.Port)},
		{Name: p + "USER", Value: cred.User},
		{Name: p + "PASSWORD", Value: cred.Password, Secret: true},
		{Name: p + "NAME", Value: cred.Database},
		{Name: p + "ADMIN_DB", Value: "postgres"},
		{Name: p + "URL", Value: u.String(), Secret: true},
	}
}

// Login connects with pgx and asks the server's version: a query, so the
// session is proven past authentication.
func (Postgres) Login(ctx context.Context, rawURL string) (Session, error) {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	s := Session{Client: "pgx"}
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return s, loginError("postgres", rawURL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "select current_setting('server_version')").Scan(&s.Server); err != nil {
		return s, loginError("postgres", rawURL, err)
	}
	return s, nil
}
