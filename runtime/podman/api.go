package podman

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"go.podman.io/podman/v6/pkg/bindings"
)

// request is one call of the libpod API.
type request struct {
	method string
	// path is the endpoint under /v<version>/libpod, with %s for each of
	// pathValues (escaped by the bindings).
	path       string
	pathValues []string
	query      url.Values
	// body, when non-nil, is sent as JSON.
	body any
	// headers are extra request headers.
	headers http.Header
}

// do sends req at the service's API version and returns the raw response,
// whatever its status. The caller closes its body.
func do(ctx context.Context, conn *bindings.Connection, svc *service, req request) (*bindings.APIResponse, error) {
	var body io.Reader
	headers := http.Header{}
	for k, v := range req.headers {
		headers[k] = v
	}
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
		headers.Set("Content-Type", "application/json")
	}
	// The bindings would otherwise address the API at their own (newer)
	// version; the service's own is what it is sure to serve.
	headers.Set("API-Version", svc.apiVersion)
	resp, err := conn.DoRequest(ctx, body, req.method, req.path, req.query, headers, req.pathValues...)
	if err != nil {
		if resp != nil && resp.Response != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, err
	}
	return resp, nil
}

// call sends req and decodes a successful JSON answer into out (which may
// be nil). An unsuccessful status is an error carrying the service's error
// model (see errors.go); a 304 Not Modified is success.
func call(ctx context.Context, conn *bindings.Connection, svc *service, req request, out any) error {
	resp, err := do(ctx, conn, svc, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return resp.Process(out)
}
