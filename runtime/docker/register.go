package docker

import (
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// init registers the adapter with runtime detection: a program that
// imports this package can detect and use Docker.
func init() {
	detect.Register(Name, func(c detect.Candidate, o detect.ConnectOptions) (runtime.ContainerRuntime, error) {
		return New(WithHost(c.Endpoint), WithLogger(o.Logger), WithPingTimeout(o.PingTimeout))
	})
}
