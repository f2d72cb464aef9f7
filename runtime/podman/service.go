package podman

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"go.podman.io/podman/v6/pkg/bindings"
	"golang.org/x/sys/unix"

	"github.com/roboco/sandboxer/runtime"
)

// ping asks the service for its libpod API version (one request, no
// retries, bounded by the ping timeout), then for what it is (rootless,
// cgroup version) and, for a local socket, for its rlimits.
func (r *Runtime) ping(ctx context.Context, conn *bindings.Connection) (*service, error) {
	pctx, cancel := context.WithTimeout(ctx, r.pingTimeout)
	defer cancel()
	// The oldest version this adapter speaks: every libpod service
	// serves it, and a Docker daemon does not.
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, baseURL(conn)+"/v4.0.0/libpod/_ping", nil)
	if err != nil {
		return nil, err
	}
	resp, err := conn.Client.Do(req)
	if err != nil {
		if pctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("no answer to ping within %s: %w", r.pingTimeout, err)
		}
		return nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	hdr := resp.Header.Get("Libpod-API-Version")
	if resp.StatusCode != http.StatusOK || hdr == "" {
		return nil, fmt.Errorf("not a libpod API: ping answered %s without a Libpod-API-Version", resp.Status)
	}
	major, minor, err := parseVersion(hdr)
	if err != nil {
		return nil, fmt.Errorf("libpod API version %q: %w", hdr, err)
	}
	if major < minAPIMajor {
		return nil, fmt.Errorf("libpod API %s is too old: this adapter needs %d.0 or later", hdr, minAPIMajor)
	}
	svc := &service{apiVersion: hdr, major: major, minor: minor}

	// The service answered: what follows may take longer than a ping.
	ictx, icancel := context.WithTimeout(ctx, infoTimeout)
	defer icancel()
	info, err := serviceInfo(ictx, conn, svc)
	if err != nil {
		return nil, fmt.Errorf("info: %w", err)
	}
	svc.rootless = info.Host.Security.Rootless
	svc.cgroupV1 = strings.TrimPrefix(info.Host.CgroupVersion, "v") == "1"
	if conn.URI.Scheme == "unix" {
		svc.rlimits, err = peerRlimits(ictx, conn.URI.Path)
		if err != nil {
			r.opts.log.DebugContext(ctx, "podman: cannot read the service's rlimits; rlimits are passed unclamped",
				"endpoint", r.endpoint, "error", err)
		}
	}
	return svc, nil
}

// baseURL is the URL prefix the bindings use for conn.
func baseURL(conn *bindings.Connection) string {
	if conn.URI.Scheme == "tcp" {
		return "http://" + conn.URI.Host + conn.URI.Path
	}
	return "http://d"
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

// infoReport is the part of GET /info the adapter reads.
type infoReport struct {
	Host struct {
		CgroupVersion string `json:"cgroupVersion"`
		Security      struct {
			Rootless bool `json:"rootless"`
		} `json:"security"`
	} `json:"host"`
	Store struct {
		GraphRoot string `json:"graphRoot"`
	} `json:"store"`
	Version struct {
		APIVersion string
		Version    string
	} `json:"version"`
}

func serviceInfo(ctx context.Context, conn *bindings.Connection, svc *service) (infoReport, error) {
	var info infoReport
	err := call(ctx, conn, svc, request{method: http.MethodGet, path: "/info"}, &info)
	return info, err
}

// Version pings the service and reports its version, its libpod API
// version, whether it runs rootless and its cgroup version.
func (r *Runtime) Version(ctx context.Context) (runtime.Info, error) {
	const op = runtime.OpVersion
	conn, svc, err := r.connect(ctx, op, r.endpoint)
	if err != nil {
		return runtime.Info{}, err
	}
	info, err := serviceInfo(ctx, conn, svc)
	if err != nil {
		return runtime.Info{}, r.wrap(op, r.endpoint, err)
	}
	return runtime.Info{
		Runtime:       Name,
		Endpoint:      r.endpoint,
		Version:       info.Version.Version,
		APIVersion:    svc.apiVersion,
		Rootless:      info.Host.Security.Rootless,
		CgroupVersion: strings.TrimPrefix(info.Host.CgroupVersion, "v"),
	}, nil
}

// graphRoot reports where the service keeps container filesystems (e.g.
// /var/lib/containers/storage).
func (r *Runtime) graphRoot(ctx context.Context) (string, error) {
	const op = runtime.OpVersion
	conn, svc, err := r.connect(ctx, op, r.endpoint)
	if err != nil {
		return "", err
	}
	info, err := serviceInfo(ctx, conn, svc)
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
