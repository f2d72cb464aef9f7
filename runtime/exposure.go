package runtime

import (
	"errors"
	"fmt"
	"net"
)

// ErrExposed: a port that was asked for on a loopback address (the
// default, DefaultHostIP) is reported published on another address, such
// as 0.0.0.0, which every host interface reaches. A sandbox's password is
// no protection against a network it was never meant to face, so this is
// an error, never rewritten to 127.0.0.1.
var ErrExposed = errors.New("published beyond loopback")

// Exposed reports whether b is published on an address other than a
// loopback one: unspecified (0.0.0.0, ::), empty (the backend did not say,
// which on Docker and Podman means every interface), or any interface's
// own address.
func (b PortBinding) Exposed() bool {
	ip := net.ParseIP(b.HostIP)
	return ip == nil || !ip.IsLoopback()
}

// CheckLoopback returns an ErrExposed error naming the first binding of
// container port port (every port when port is 0) that is Exposed, or nil.
func CheckLoopback(bindings []PortBinding, port int) error {
	for _, b := range bindings {
		if (port == 0 || b.ContainerPort == port) && b.HostPort != 0 && b.Exposed() {
			host := b.HostIP
			if host == "" {
				host = "(unspecified)"
			}
			return fmt.Errorf("%w: port %d/%s is published on %s, not on loopback only", ErrExposed, b.ContainerPort, protocolOf(b), net.JoinHostPort(host, fmt.Sprint(b.HostPort)))
		}
	}
	return nil
}

func protocolOf(b PortBinding) string {
	if b.Protocol == "" {
		return "tcp"
	}
	return b.Protocol
}
