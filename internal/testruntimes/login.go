package testruntimes

import (
	"context"
	"fmt"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/provision"
)

// Login logs in once, with no retry, to c, a container of sb, with its
// engine's real client (engines.Registry.Login) and the URL sb emitted for
// it under the default env prefix: the env and the containers belong
// together.
func Login(ctx context.Context, sb provision.Sandbox, c provision.Container) (engines.Session, error) {
	url, err := URL(sb, c)
	if err != nil {
		return engines.Session{}, err
	}
	return engines.Default.Login(ctx, c.Engine, url)
}

// URL is the connection URL sb emitted for c, one of its containers, under
// the default env prefix.
func URL(sb provision.Sandbox, c provision.Container) (string, error) {
	name := engines.Default.URLName(c.Engine, provision.DefaultEnvPrefix)
	url, ok := sb.Lookup(name)
	if !ok {
		return "", fmt.Errorf("%s: the sandbox emitted no %q", c.Name, name)
	}
	return url, nil
}
