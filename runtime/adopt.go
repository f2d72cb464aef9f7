package runtime

import "context"

// Adopter is implemented by adapters whose backend can itself remove a
// container when the container's owner is deleted, with no sandboxer
// process running: Kubernetes, where a sandbox pod whose ownerReferences
// name the agent pod is deleted by the cluster's garbage collector once
// the agent pod is gone. It is not part of the port: on the other backends
// the janitor is what removes a gone owner's sandboxes, and it still covers
// every sandbox that was never adopted.
//
// Owners are named as the owner label names them (the owner's container
// or pod name, in the adapter's namespace).
type Adopter interface {
	// Adopt ties each of containers to owner: once it returns nil, the
	// backend removes each of them when owner is deleted. A container
	// already adopted by owner (Container.AdoptedBy) is left as it is; one
	// that no longer exists is skipped. An owner that does not exist gives
	// an error matching ErrNotFound, and nothing is changed.
	Adopt(ctx context.Context, owner string, containers []Container) error
}
