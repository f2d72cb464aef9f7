package containerd

import (
	"strings"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// init registers the adapter with runtime detection: a program that
// imports this package can detect and use containerd.
func init() {
	detect.Register(Name, func(c detect.Candidate, o detect.ConnectOptions) (runtime.ContainerRuntime, error) {
		opts := []Option{WithAddress(strings.TrimPrefix(c.Endpoint, "unix://")), WithLogger(o.Logger), WithPingTimeout(o.PingTimeout)}
		if c.Namespace != "" {
			opts = append(opts, WithNamespace(c.Namespace))
		}
		return New(opts...)
	})
}
