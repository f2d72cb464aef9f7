package engines

import (
	"net/url"
	"strconv"
)

// ConnURL is the connection URL an engine emits: scheme://user:password@
// host:port/path?query, with user and password escaped as the URL needs
// (user "" leaves the user name out: user:password becomes :password).
func ConnURL(scheme, user, password string, ep Endpoint, path, query string) string {
	u := url.URL{
		Scheme:   scheme,
		User:     url.UserPassword(user, password),
		Host:     ep.HostPort(),
		Path:     "/" + path,
		RawQuery: query,
	}
	return u.String()
}

// ConnEnv is the env an engine emits for one connection, every name under
// group (e.g. "APP_DB_"): HOST and PORT of ep first, then vars (their names
// are suffixes under group), then URL, rawURL, which is secret (it embeds
// the password).
func ConnEnv(group string, ep Endpoint, rawURL string, vars ...EnvVar) []EnvVar {
	out := make([]EnvVar, 0, len(vars)+3)
	out = append(out, EnvVar{Name: group + "HOST", Value: ep.Host}, EnvVar{Name: group + "PORT", Value: strconv.Itoa(ep.Port)})
	for _, v := range vars {
		v.Name = group + v.Name
		out = append(out, v)
	}
	return append(out, EnvVar{Name: group + "URL", Value: rawURL, Secret: true})
}

// UserVars are the USER and PASSWORD variables of cred (the password
// secret), for ConnEnv.
func UserVars(cred Credentials) []EnvVar {
	return []EnvVar{{Name: "USER", Value: cred.User}, {Name: "PASSWORD", Value: cred.Password, Secret: true}}
}
