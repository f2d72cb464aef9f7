package kubernetes

import (
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// init registers the adapter with runtime detection: a program that
// imports this package can use Kubernetes when asked for explicitly
// (detect.ExplicitOnly).
func init() {
	detect.Register(Name, func(c detect.Candidate, o detect.ConnectOptions) (runtime.ContainerRuntime, error) {
		opts := []Option{WithKubeconfig(c.Endpoint), WithLogger(o.Logger), WithPingTimeout(o.PingTimeout)}
		if c.Namespace != "" {
			opts = append(opts, WithNamespace(c.Namespace))
		}
		return New(opts...)
	})
}
