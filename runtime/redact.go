package runtime

import (
	"net/url"
	"slices"
	"strings"
)

// Redacted stands in for a credential that RedactEndpoint removed.
const Redacted = "xxxxx"

// secretParams are the query parameters whose values are credentials.
var secretParams = []string{"token", "password", "passwd", "secret", "key", "auth", "sig", "signature", "credential"}

// EndpointSecrets returns the credentials an endpoint carries: the password
// of its user info (ssh://user:secret@host, tcp://user:pw@host), its whole
// user info when it is a bare token (https://token@host; ssh:// names a
// login there, which stays), and the values of query parameters whose name
// says they are secret (?token=..., ?access_key=...). Endpoints without
// "://" (a socket path) carry none.
func EndpointSecrets(endpoint string) []string {
	scheme, rest, ok := strings.Cut(endpoint, "://")
	if !ok {
		return nil
	}
	var out []string
	authority, _, _ := strings.Cut(rest, "/")
	authority, _, _ = strings.Cut(authority, "?")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		user, pw, hasPW := strings.Cut(authority[:at], ":")
		switch {
		case hasPW && pw != "":
			out = append(out, pw)
		case !hasPW && user != "" && !strings.EqualFold(scheme, "ssh"):
			out = append(out, user)
		}
	}
	if _, query, ok := strings.Cut(rest, "?"); ok {
		query, _, _ = strings.Cut(query, "#")
		for _, kv := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			if v == "" || !secretParam(k) {
				continue
			}
			out = append(out, v)
		}
	}
	// A percent-encoded credential is also redacted as decoded, the
	// form a backend may quote it in.
	for _, s := range slices.Clone(out) {
		if dec, err := url.PathUnescape(s); err == nil && dec != s {
			out = append(out, dec)
		}
	}
	return out
}

func secretParam(name string) bool {
	name = strings.ToLower(name)
	for _, s := range secretParams {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// RedactEndpoint returns s with every credential of endpoint
// (EndpointSecrets) replaced by Redacted. It is the one redaction of
// runtime endpoints: RedactEndpoint(e, e) is the endpoint as messages, logs
// and doctor show it, and any message that may quote the endpoint (a
// backend's dial error) goes through it, or through RedactEndpointError,
// before anyone sees it.
func RedactEndpoint(endpoint, s string) string {
	for _, secret := range EndpointSecrets(endpoint) {
		s = strings.ReplaceAll(s, secret, Redacted)
	}
	return s
}

// ShowEndpoint is endpoint with its credentials redacted:
// ssh://user:xxxxx@host/run/podman/podman.sock.
func ShowEndpoint(endpoint string) string { return RedactEndpoint(endpoint, endpoint) }

// RedactEndpointError returns err with endpoint's credentials redacted
// from its message; errors.Is and errors.As still see the whole chain.
// nil stays nil, and an error without credentials is returned as it is.
func RedactEndpointError(endpoint string, err error) error {
	if err == nil {
		return nil
	}
	return Reworded(err, RedactEndpoint(endpoint, err.Error()))
}

// Reworded returns err with msg as its message, or err itself when msg is
// its message already; errors.Is and errors.As still see err's whole
// chain. It is how a redaction hides a secret without losing the error's
// kind.
func Reworded(err error, msg string) error {
	if err == nil || msg == err.Error() {
		return err
	}
	return &rewordedError{msg: msg, err: err}
}

type rewordedError struct {
	msg string
	err error
}

func (e *rewordedError) Error() string { return e.msg }
func (e *rewordedError) Unwrap() error { return e.err }
