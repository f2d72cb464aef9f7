package runtime

// Forms says which guarantees of the port a backend gives in another form,
// because its model has no room for the port's own (a Kubernetes pod cannot
// be stopped and kept, nor publish a port on the provisioner's loopback).
// The zero value is the port as written: Docker, Podman and containerd
// report it. Each field is a documented difference that the conformance
// suite asserts in its place, so a backend never differs silently; the
// lifecycle code never reads it (it classifies errors with errors.Is).
type Forms struct {
	// NoHostPorts: RunSpec.Ports is ErrUnsupported; a container is
	// reached at its address on a network (Container.Networks).
	NoHostPorts bool
	// NoProcessLimits: RunSpec.PidsLimit and RunSpec.Ulimits are
	// ErrUnsupported (memory and CPU limits are enforced).
	NoProcessLimits bool
	// NoExecUser: ExecSpec.User is ErrUnsupported.
	NoExecUser bool
	// TmpfsSizeOnly: a tmpfs's options may give its size (and "rw"); any
	// other option (mode=, uid=, ...) is ErrUnsupported.
	TmpfsSizeOnly bool
	// StopRemoves: Stop and Kill of a running container delete it, so
	// that once they return Inspect is ErrNotFound (Stop still waits out
	// the grace of a process that ignores SIGTERM). Of a container that
	// has exited they do nothing, as the port says.
	StopRemoves bool
	// NoNetworkSubnets: Network.Subnet is zero, because the backend's
	// networks are records over one flat address space (a Kubernetes
	// pod network), isolated by policy rather than by subnet.
	NoNetworkSubnets bool
}

// FormReporter is implemented by adapters whose Forms are not the zero
// value. It is not part of the port.
type FormReporter interface {
	Forms() Forms
}

// FormsOf returns rt's Forms: the zero value unless rt reports others.
func FormsOf(rt ContainerRuntime) Forms {
	if f, ok := As[FormReporter](rt); ok {
		return f.Forms()
	}
	return Forms{}
}
