package podman

import (
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// init registers the adapter with runtime detection: a program that
// imports this package can detect and use Podman, rootful and rootless.
func init() {
	detect.Register(Name, func(c detect.Candidate, o detect.ConnectOptions) (runtime.ContainerRuntime, error) {
		opts := []Option{WithHost(c.Endpoint), WithLogger(o.Logger), WithPingTimeout(o.PingTimeout)}
		if o.UnenforcedLimits {
			opts = append(opts, WithUnenforcedLimits())
		}
		return New(opts...)
	})
}
