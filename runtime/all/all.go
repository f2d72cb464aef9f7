// Package all links every runtime adapter (Docker, Podman, containerd,
// Kubernetes) into a program, for runtime detection to choose from:
//
//	import _ "github.com/roboco/sandboxer/runtime/all"
//
// A program that needs fewer imports the adapters it uses instead
// (runtime/docker, runtime/podman, ...): each registers itself with
// runtime/detect when imported, as a database/sql driver does.
package all

import (
	// Each adapter registers itself with runtime/detect in its init.
	_ "github.com/roboco/sandboxer/runtime/containerd"
	_ "github.com/roboco/sandboxer/runtime/docker"
	_ "github.com/roboco/sandboxer/runtime/kubernetes"
	_ "github.com/roboco/sandboxer/runtime/podman"
)
