package sandboxtest

// The runtimes a developer's machine usually has: Docker and Podman, whose
// adapters speak HTTP and cost little to link (bench/adopt.sh measures
// it). A test of a containerd or Kubernetes host links that adapter itself:
//
//	import _ "github.com/roboco/sandboxer/runtime/containerd"
//
// (or runtime/all for every one); detection that finds a runtime whose
// adapter is not linked says which import to add.
import (
	_ "github.com/roboco/sandboxer/runtime/docker"
	_ "github.com/roboco/sandboxer/runtime/podman"
)
