// Command democlient is the client half of the quick-start demo: run under
// `sandboxer run --services postgres,redis,mongo -- democlient`, it reads
// the sandboxes' env, prints it with the passwords masked, and proves each
// service by logging in with the real Go client a consumer would use (each
// engine's own login: pgx, go-redis, mongo-driver v2) and asking the
// server's version. It exits 1 if any service fails.
//
// Usage:
//
//	democlient [-env-prefix ROBOCO_TEST]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/roboco/sandboxer/engines"
	_ "github.com/roboco/sandboxer/engines/all"
	"github.com/roboco/sandboxer/provision"
)

func main() {
	prefix := flag.String("env-prefix", provision.DefaultEnvPrefix, "prefix of the sandbox env")
	flag.Parse()

	// The env as sandboxer emitted it, with each variable's secret flag
	// from its engine, so that provision's masking applies; and each
	// engine's connection URL.
	var sb provision.Sandbox
	var services []string
	urls := map[string]string{}
	for _, e := range engines.Default.All() {
		found := false
		for _, v := range e.Env(*prefix, engines.Endpoint{}, engines.Credentials{Password: "x"}) {
			if val, ok := os.LookupEnv(v.Name); ok {
				v.Value = val
				sb.Env = append(sb.Env, v)
				found = true
				if u, ok := engines.URLVar([]engines.EnvVar{v}); ok {
					urls[e.Spec().Name] = u.Value
				}
			}
		}
		if found {
			services = append(services, e.Spec().Name)
		}
	}
	if len(services) == 0 {
		fmt.Fprintf(os.Stderr, "democlient: no %s_* variables: run me under `sandboxer run`\n", *prefix)
		os.Exit(2)
	}
	fmt.Println("env (passwords masked):")
	for _, v := range sb.Masked().Env {
		fmt.Printf("  %s=%s\n", v.Name, v.Value)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	failed := false
	for _, s := range services {
		start := time.Now()
		session, err := engines.Default.Login(ctx, s, urls[s])
		if err != nil {
			failed = true
			fmt.Printf("%-8s FAILED: %v\n", s, err)
			continue
		}
		fmt.Printf("%-8s ok in %s: %s logged in (server %s)\n", s, time.Since(start).Round(time.Millisecond), session.Client, session.Server)
	}
	if failed {
		os.Exit(1)
	}
}
