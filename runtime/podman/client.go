package podman

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// client is the libpod REST API of one service as this adapter calls it:
// one method per request, taking and returning the wire types of wire.go.
// It is the only place that spells out a request (method, path, query,
// body). Its errors are untranslated: the service's error model
// (*errorModel, for an unsuccessful status) or the transport's; the verbs
// hand them to wrap.
type client struct {
	conn *conn
	// svc is what the ping learnt: the API version requests are made at.
	svc *service
}

// pingPath is the ping at the oldest libpod API this adapter speaks: every
// libpod service serves it, and a Docker daemon does not.
const pingPath = "/v4.0.0/libpod/_ping"

// conn is how requests reach one service: plain HTTP/1.1 over its unix
// socket, over TCP, or over an ssh process's stdio (ssh.go). It is the
// whole transport: the adapter links no Podman client library.
type conn struct {
	// uri is the endpoint, parsed (a unix one normalised to its path).
	uri *url.URL
	// base prefixes every request's URL: "http://d" for a socket or ssh
	// (the host is not used), "http://host[/prefix]" for TCP.
	base   string
	client *http.Client
}

// pingService asks the service at cn for its libpod API version (one request,
// no retries), before anything else is known of it.
func pingService(ctx context.Context, cn *conn) (apiVersion string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cn.base+pingPath, nil)
	if err != nil {
		return "", err
	}
	resp, err := cn.client.Do(req)
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	v := resp.Header.Get("Libpod-API-Version")
	if resp.StatusCode != http.StatusOK || v == "" {
		return "", fmt.Errorf("not a libpod API: ping answered %s without a Libpod-API-Version", resp.Status)
	}
	return v, nil
}

// info is GET /info.
func (c *client) info(ctx context.Context) (infoReport, error) {
	var out infoReport
	err := c.call(ctx, request{method: http.MethodGet, path: "/info"}, &out)
	return out, err
}

// imageExists is GET /images/{ref}/exists: 204 when the service has the
// image, 404 when it has not.
func (c *client) imageExists(ctx context.Context, ref string) (bool, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/images/%s/exists", pathValues: []string{ref}})
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent, http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	default:
		return false, resp.Process(nil)
	}
}

// pullImage is POST /images/pull of ref (fully qualified), always from the
// registry, with its progress (pullReport objects) as the returned stream;
// insecure pulls over plain HTTP without verifying TLS. The stream reports
// most failures itself, with a 200 status.
func (c *client) pullImage(ctx context.Context, ref string, insecure bool) (io.ReadCloser, error) {
	q := url.Values{"reference": {ref}, "quiet": {"false"}, "policy": {"always"}}
	if insecure {
		q.Set("tlsVerify", "false")
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/images/pull", query: q})
	if err != nil {
		return nil, err
	}
	if !resp.IsSuccess() {
		defer resp.Body.Close()
		return nil, resp.Process(nil)
	}
	return resp.Body, nil
}

// imageInspect is GET /images/{ref}/json.
func (c *client) imageInspect(ctx context.Context, ref string) (imageInspect, error) {
	var out imageInspect
	err := c.call(ctx, request{method: http.MethodGet, path: "/images/%s/json", pathValues: []string{ref}}, &out)
	return out, err
}

// saveImage is GET /images/{ref}/get as an uncompressed docker-archive;
// the caller closes the returned stream.
func (c *client) saveImage(ctx context.Context, ref string) (io.ReadCloser, error) {
	q := url.Values{"format": {"docker-archive"}, "compress": {"false"}}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/images/%s/get", pathValues: []string{ref}, query: q})
	if err != nil {
		return nil, err
	}
	if !resp.IsSuccess() {
		defer resp.Body.Close()
		return nil, resp.Process(nil)
	}
	return resp.Body, nil
}

// loadImage is POST /images/load of the archive in body.
func (c *client) loadImage(ctx context.Context, body io.Reader) (loadReport, error) {
	var out loadReport
	err := c.call(ctx, request{method: http.MethodPost, path: "/images/load", raw: body}, &out)
	return out, err
}

// removeImage is DELETE /images/{ref}, not forced: forced, libpod also
// removes the containers that use the image.
func (c *client) removeImage(ctx context.Context, ref string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: "/images/%s", pathValues: []string{ref}}, nil)
}

// untagImage is POST /images/{ref}/untag of the one tag repo:tag.
func (c *client) untagImage(ctx context.Context, ref, repo, tag string) error {
	q := url.Values{"repo": {repo}, "tag": {tag}}
	return c.call(ctx, request{method: http.MethodPost, path: "/images/%s/untag", pathValues: []string{ref}, query: q}, nil)
}

// createContainer is POST /containers/create.
func (c *client) createContainer(ctx context.Context, sg *specGenerator) (createResponse, error) {
	var out createResponse
	err := c.call(ctx, request{method: http.MethodPost, path: "/containers/create", body: sg}, &out)
	return out, err
}

// startContainer is POST /containers/{id}/start.
func (c *client) startContainer(ctx context.Context, id string) error {
	return c.call(ctx, request{method: http.MethodPost, path: "/containers/%s/start", pathValues: []string{id}}, nil)
}

// inspectContainer is GET /containers/{ref}/json.
func (c *client) inspectContainer(ctx context.Context, ref string) (*containerInspect, error) {
	var out containerInspect
	if err := c.call(ctx, request{method: http.MethodGet, path: "/containers/%s/json", pathValues: []string{ref}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// stopContainer is POST /containers/{ref}/stop, waiting timeout seconds
// before the kill.
func (c *client) stopContainer(ctx context.Context, ref string, timeout int) error {
	return c.call(ctx, request{
		method:     http.MethodPost,
		path:       "/containers/%s/stop",
		pathValues: []string{ref},
		query:      url.Values{"timeout": {strconv.Itoa(timeout)}},
	}, nil)
}

// killContainer is POST /containers/{ref}/kill with signal ("SIGKILL").
func (c *client) killContainer(ctx context.Context, ref, signal string) error {
	return c.call(ctx, request{
		method:     http.MethodPost,
		path:       "/containers/%s/kill",
		pathValues: []string{ref},
		query:      url.Values{"signal": {signal}},
	}, nil)
}

// removeContainer is DELETE /containers/{ref}: forced, with its anonymous
// volumes, and at once (timeout 0: a forced removal kills without waiting
// out the stop timeout first, as Docker does). With ignoreAbsent, an
// absent container is no error; without, it is the service's 404.
func (c *client) removeContainer(ctx context.Context, ref string, ignoreAbsent bool) error {
	return c.call(ctx, request{
		method:     http.MethodDelete,
		path:       "/containers/%s",
		pathValues: []string{ref},
		query:      url.Values{"force": {"true"}, "volumes": {"true"}, "timeout": {"0"}, "ignore": {strconv.FormatBool(ignoreAbsent)}},
	}, nil)
}

// listContainers is GET /containers/json of every container, in any
// state, whose labels match every "key=value" of labels (all for none).
func (c *client) listContainers(ctx context.Context, labels []string) ([]listedContainer, error) {
	q := url.Values{"all": {"true"}}
	if len(labels) > 0 {
		f, err := json.Marshal(listFilters{Label: labels})
		if err != nil {
			return nil, err
		}
		q.Set("filters", string(f))
	}
	var out []listedContainer
	err := c.call(ctx, request{method: http.MethodGet, path: "/containers/json", query: q}, &out)
	return out, err
}

// execCreate is POST /containers/{ref}/exec; it returns the session's ID.
func (c *client) execCreate(ctx context.Context, ref string, cfg execCreateConfig) (string, error) {
	var out idResponse
	err := c.call(ctx, request{method: http.MethodPost, path: "/containers/%s/exec", pathValues: []string{ref}, body: cfg}, &out)
	return out.ID, err
}

// execStart is POST /exec/{id}/start, attached: it returns the session's
// multiplexed stdout and stderr (see demux), which end with the process.
// The stream is an upgraded connection that no longer follows ctx: the
// caller closes it.
func (c *client) execStart(ctx context.Context, id string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, request{
		method:     http.MethodPost,
		path:       "/exec/%s/start",
		pathValues: []string{id},
		body:       execStartConfig{Detach: false, Tty: false},
		headers:    http.Header{"Connection": {"Upgrade"}, "Upgrade": {"tcp"}},
	})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, resp.Process(nil)
	}
	return resp.Body, nil
}

// execInspect is GET /exec/{id}/json.
func (c *client) execInspect(ctx context.Context, id string) (execSession, error) {
	var out execSession
	err := c.call(ctx, request{method: http.MethodGet, path: "/exec/%s/json", pathValues: []string{id}}, &out)
	return out, err
}

// execRemove is POST /exec/{id}/remove, forced (libpod API 4.8 and later:
// see service.canRemoveExec).
func (c *client) execRemove(ctx context.Context, id string) error {
	return c.call(ctx, request{method: http.MethodPost, path: "/exec/%s/remove", pathValues: []string{id}, body: execRemoveConfig{Force: true}}, nil)
}

// createNetwork is POST /networks/create.
func (c *client) createNetwork(ctx context.Context, n networkCreate) (networkReport, error) {
	var out networkReport
	err := c.call(ctx, request{method: http.MethodPost, path: "/networks/create", body: n}, &out)
	return out, err
}

// listNetworks is GET /networks/json of the networks whose labels match
// every "key=value" of labels (all for none).
func (c *client) listNetworks(ctx context.Context, labels []string) ([]networkReport, error) {
	q := url.Values{}
	if len(labels) > 0 {
		f, err := json.Marshal(listFilters{Label: labels})
		if err != nil {
			return nil, err
		}
		q.Set("filters", string(f))
	}
	var out []networkReport
	err := c.call(ctx, request{method: http.MethodGet, path: "/networks/json", query: q}, &out)
	return out, err
}

// inspectNetwork is GET /networks/{name}/json.
func (c *client) inspectNetwork(ctx context.Context, name string) (networkReport, error) {
	var out networkReport
	err := c.call(ctx, request{method: http.MethodGet, path: "/networks/%s/json", pathValues: []string{name}}, &out)
	return out, err
}

// removeNetwork is DELETE /networks/{name}.
func (c *client) removeNetwork(ctx context.Context, name string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: "/networks/%s", pathValues: []string{name}}, nil)
}

// request is one call of the libpod API.
type request struct {
	method string
	// path is the endpoint under /v<version>/libpod, with %s for each of
	// pathValues (each escaped as one path segment).
	path       string
	pathValues []string
	query      url.Values
	// body, when non-nil, is sent as JSON.
	body any
	// headers are extra request headers.
	headers http.Header
	// raw, when non-nil (and body nil), is sent as it is, as a tar.
	raw io.Reader
}

// response is an answer of the service, whatever its status. The caller
// closes its body.
type response struct{ *http.Response }

// IsSuccess reports a 2xx status.
func (r *response) IsSuccess() bool { return r.StatusCode >= 200 && r.StatusCode < 300 }

// Process reads the whole answer and decodes a successful (2xx) or
// not-modified (3xx) one into out, which may be nil. Any other status is
// an *errorModel: the service's own JSON error when it sent one, else the
// body's text with the status.
func (r *response) Process(out any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if r.StatusCode >= 200 && r.StatusCode < 400 {
		if out == nil || len(bytes.TrimSpace(data)) == 0 {
			return nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode the answer (%s): %w", r.Status, err)
		}
		return nil
	}
	em := &errorModel{}
	if json.Unmarshal(data, em) != nil || (em.Message == "" && em.Because == "") {
		em = &errorModel{Message: strings.TrimSpace(string(data))}
	}
	if em.ResponseCode == 0 {
		em.ResponseCode = r.StatusCode
	}
	return em
}

// dialAttempts bounds how often a request is sent again when its
// connection could not even be made (nothing reached the service, so any
// method may be retried): a socket being re-created, a busy accept queue.
const dialAttempts = 3

// do sends req at the service's API version and returns the raw response,
// whatever its status. The caller closes its body.
func (c *client) do(ctx context.Context, req request) (*response, error) {
	var body []byte
	contentType := ""
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body, contentType = b, "application/json"
	}
	args := make([]any, 0, len(req.pathValues)+1)
	args = append(args, c.svc.apiVersion)
	for _, v := range req.pathValues {
		args = append(args, url.PathEscape(v))
	}
	uri := fmt.Sprintf(c.conn.base+"/v%s/libpod"+req.path, args...)
	if len(req.query) > 0 {
		uri += "?" + req.query.Encode()
	}
	for attempt := 1; ; attempt++ {
		var rd io.Reader
		switch {
		case body != nil:
			rd = bytes.NewReader(body)
		case req.raw != nil:
			rd, contentType = req.raw, "application/x-tar"
		}
		hr, err := http.NewRequestWithContext(ctx, req.method, uri, rd)
		if err != nil {
			return nil, err
		}
		for k, v := range req.headers {
			hr.Header[k] = v
		}
		if contentType != "" {
			hr.Header.Set("Content-Type", contentType)
		}
		resp, err := c.conn.client.Do(hr)
		if err == nil {
			return &response{resp}, nil
		}
		// A raw body was read by this attempt; only an unsent JSON or
		// empty one can go again.
		var de *dialError
		if attempt == dialAttempts || req.raw != nil || !errors.As(err, &de) {
			return nil, err
		}
		t := time.NewTimer(time.Duration(attempt) * 100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// dialError marks a failure to make the connection: the request was not
// sent.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// call sends req and decodes a successful JSON answer into out (which may
// be nil). An unsuccessful status is an error carrying the service's error
// model (see errors.go); a 304 Not Modified is success.
func (c *client) call(ctx context.Context, req request, out any) error {
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return resp.Process(out)
}
