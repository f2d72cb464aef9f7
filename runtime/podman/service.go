package podman

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/roboco/sandboxer/runtime"
)

// ping asks the service for its libpod API version (one request, no
// retries, bounded by the ping timeout), then for what it is (rootless,
// cgroup version) and, for a local socket, for its rlimits.
func (r *Runtime) ping(ctx context.Context, conn *conn) (*service, error) {
	timeout := r.pingTimeout
	if conn.uri.Scheme == "ssh" {
		timeout = max(timeout, sshPingTimeout)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := pingService(pctx, conn)
	if err != nil {
		if pctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("no answer to ping within %s: %w", timeout, err)
		}
		return nil, err
	}
	major, minor, err := parseVersion(v)
	if err != nil {
		return nil, fmt.Errorf("libpod API version %q: %w", v, err)
	}
	if major < minAPIMajor {
		return nil, fmt.Errorf("libpod API %s is too old: this adapter needs %d.0 or later", v, minAPIMajor)
	}
	svc := &service{apiVersion: v, major: major, minor: minor}

	// The service answered: what follows may take longer than a ping.
	ictx, icancel := context.WithTimeout(ctx, infoTimeout)
	defer icancel()
	info, err := (&client{conn: conn, svc: svc}).info(ictx)
	if err != nil {
		return nil, fmt.Errorf("info: %w", err)
	}
	svc.info = info
	svc.rootless = info.Host.Security.Rootless
	svc.cgroupV1 = strings.TrimPrefix(info.Host.CgroupVersion, "v") == "1"
	svc.controllers = info.Host.CgroupControllers
	if conn.uri.Scheme == "unix" {
		svc.rlimits, err = peerRlimits(ictx, conn.uri.Path)
		if err != nil {
			r.opts.Logger.DebugContext(ctx, "podman: cannot read the service's rlimits; rlimits are passed unclamped",
				"endpoint", r.Endpoint(), "error", runtime.RedactEndpointError(r.endpoint, err))
		}
	}
	return svc, nil
}

// strictIsolation reports whether the service knows libpod's
// isolate=strict network option (Podman 4.6 and later, with netavark 1.7).
func (s *service) strictIsolation() bool {
	return s.major > 4 || (s.major == 4 && s.minor >= 6)
}

// canRemoveExec reports whether the service removes exec sessions on
// request (libpod API 4.8 and later).
func (s *service) canRemoveExec() bool {
	return s.major > 4 || (s.major == 4 && s.minor >= 8)
}

// parseVersion reads "4.3.1" (or "v5.0.0-dev") as major and minor.
func parseVersion(v string) (int, int, error) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, errors.New("not major.minor[.patch]")
	}
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return 0, 0, err
	}
	minor, err := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err != nil {
		return 0, 0, err
	}
	return major, minor, nil
}

// Version pings the service (a Runtime's first call: its ping's info;
// later ones: /info again) and reports its version, its libpod API
// version, whether it runs rootless and its cgroup version.
func (r *Runtime) Version(ctx context.Context) (runtime.Info, error) {
	const op = runtime.OpVersion
	r.mu.Lock()
	pinged := r.svc != nil
	r.mu.Unlock()
	c, err := r.connect(ctx, op, r.endpoint)
	if err != nil {
		return runtime.Info{}, err
	}
	// The ping of a first call has just read the info: one /info, not
	// two, within the caller's deadline (a loaded rootless service takes
	// seconds over each).
	info := c.svc.info
	if pinged {
		if info, err = c.info(ctx); err != nil {
			return runtime.Info{}, r.wrap(op, r.endpoint, err)
		}
	}
	return runtime.Info{
		Runtime:        Name,
		Endpoint:       r.Endpoint(),
		Version:        info.Version.Version,
		APIVersion:     c.svc.apiVersion,
		Rootless:       info.Host.Security.Rootless,
		CgroupVersion:  strings.TrimPrefix(info.Host.CgroupVersion, "v"),
		ReportsOOMKill: reportsOOMKill(info.Version.Version),
	}, nil
}

// reportsOOMKill: Podman fills State.OOMKilled from version 5.0 on
// (containers/podman#21523, fixing #13102: before, conmon wrote its "oom"
// file where Podman never looked, and an OOM-killed container read as
// exited 137, as on the Podman 4.3 verified here).
func reportsOOMKill(version string) bool {
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 5
}

// graphRoot reports where the service keeps container filesystems (e.g.
// /var/lib/containers/storage).
func (r *Runtime) graphRoot(ctx context.Context) (string, error) {
	const op = runtime.OpVersion
	c, err := r.connect(ctx, op, r.endpoint)
	if err != nil {
		return "", err
	}
	info, err := c.info(ctx)
	if err != nil {
		return "", r.wrap(op, r.endpoint, err)
	}
	return info.Store.GraphRoot, nil
}

// peerRlimits reads the hard rlimits of the process serving the unix
// socket at path: its PID comes from SO_PEERCRED (the process that called
// listen), its limits from /proc. They are what the service can grant a
// container when it lacks CAP_SYS_RESOURCE. A service in another PID
// namespace (or behind socket activation) may give a PID that is not
// there or not it; then the limits are unknown or approximate.
func peerRlimits(ctx context.Context, path string) (map[string]uint64, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("%T is not a unix connection", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	if cred.Pid <= 0 {
		return nil, errors.New("the service's PID is not visible from here")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/limits", cred.Pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseProcLimits(f)
}

// procLimitRows maps the rows of /proc/<pid>/limits to rlimit names.
var procLimitRows = map[string]string{
	"Max cpu time":          "cpu",
	"Max file size":         "fsize",
	"Max data size":         "data",
	"Max stack size":        "stack",
	"Max core file size":    "core",
	"Max resident set":      "rss",
	"Max processes":         "nproc",
	"Max open files":        "nofile",
	"Max locked memory":     "memlock",
	"Max address space":     "as",
	"Max file locks":        "locks",
	"Max pending signals":   "sigpending",
	"Max msgqueue size":     "msgqueue",
	"Max nice priority":     "nice",
	"Max realtime priority": "rtprio",
	"Max realtime timeout":  "rttime",
}

// parseProcLimits reads the hard limits of /proc/<pid>/limits by rlimit
// name; "unlimited" is left out (nothing to clamp to).
func parseProcLimits(r io.Reader) (map[string]uint64, error) {
	out := map[string]uint64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		for row, name := range procLimitRows {
			rest, ok := strings.CutPrefix(line, row)
			if !ok || (rest != "" && rest[0] != ' ') {
				continue
			}
			f := strings.Fields(rest)
			if len(f) < 2 || f[1] == "unlimited" {
				continue
			}
			hard, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("limits row %q: %w", line, err)
			}
			out[name] = hard
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no limits found")
	}
	return out, nil
}
