// Package runtime is sandboxer's port to container runtimes: the
// ContainerRuntime interface, the plain types its verbs take and return,
// and the error kinds that every adapter translates its backend's errors
// into.
//
// The lifecycle packages (provision, janitor) and the engine registry are
// written only against this package. Adapters live in runtime/docker,
// runtime/podman, runtime/containerd and runtime/kubernetes; the
// conformance package proves that they all honour the same semantics.
package runtime
