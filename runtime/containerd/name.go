package containerd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/identifiers"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Container IDs and names, as nerdctl has them: a container's ID is 64
// random hex digits, chosen at create and never given to another
// container, and its name is the label NerdctlNameLabel. A name is taken
// by at most one container of the namespace, which a per-name file lock
// around "is the name taken? → create" keeps so across processes. A verb
// given a reference reads it as an ID first, then as a name (as Docker
// does). Containers made before IDs were random (the ID is the name, no
// name label) are found the same way: by ID, which is their name.

// nameLockBuckets is how many lock files the names hash into: two names
// of one bucket take turns at create, which costs nothing but a short
// wait, and no lock file ever needs deleting.
const nameLockBuckets = 256

// newID is a fresh container ID: 64 hex digits from crypto/rand, as
// Docker's, Podman's and nerdctl's are.
func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// nameOf is a container's name: its name label, or, for a container made
// with the ID as its name (the adapter's old scheme, ctr), its ID.
func nameOf(info containers.Container) string {
	if n := info.Labels[NerdctlNameLabel]; n != "" {
		return n
	}
	return info.ID
}

// lockName takes the lock of name's bucket (waiting while ctx lets it),
// which every create of a name of that bucket holds from "is the name
// taken?" until the container exists, and returns its release.
func (r *Runtime) lockName(ctx context.Context, name string) (func(), error) {
	sum := sha256.Sum256([]byte(r.namespace + "\x00" + name))
	bucket := strconv.Itoa(int(sum[0]) % nameLockBuckets)
	unlock, err := lockDir(ctx, filepath.Join(r.stateDir, "names", bucket), true)
	if err != nil {
		return nil, fmt.Errorf("lock the name %q: %w", name, err)
	}
	return unlock, nil
}

// nameTaken reports whether a container of the namespace is known by name:
// one whose name label is name, or one whose ID is name (made under the
// old scheme, or by another tool).
func (r *Runtime) nameTaken(ctx context.Context, name string) (bool, error) {
	if _, err := r.client.ContainerService().Get(ctx, name); err == nil {
		return true, nil
	} else if !cerrdefs.IsNotFound(err) {
		return false, err
	}
	infos, err := r.client.ContainerService().List(ctx, labelFilter(map[string]string{NerdctlNameLabel: name}))
	if err != nil {
		return false, err
	}
	return len(infos) > 0, nil
}

// getContainer reads the metadata of the container ref names: the
// container whose ID is ref, else the one whose name label is ref. No
// such container (or a reference no container can have) is ErrNotFound;
// a name two containers carry (made by another tool, which took no lock)
// is an error naming both IDs, and neither is acted on. An error is
// translated for op.
func (r *Runtime) getContainer(ctx context.Context, op, ref string) (containers.Container, error) {
	if identifiers.Validate(ref) != nil {
		return containers.Container{}, r.wrap(op, ref, adapterkit.WithKind(runtime.ErrNotFound, "no container is named %q", ref))
	}
	info, err := r.client.ContainerService().Get(ctx, ref)
	if err == nil {
		return info, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return containers.Container{}, r.wrap(op, ref, err)
	}
	infos, err := r.client.ContainerService().List(ctx, labelFilter(map[string]string{NerdctlNameLabel: ref}))
	if err != nil {
		return containers.Container{}, r.wrap(op, ref, err)
	}
	switch len(infos) {
	case 0:
		return containers.Container{}, r.wrap(op, ref, adapterkit.WithKind(runtime.ErrNotFound, "no container has the ID or name %q", ref))
	case 1:
		return infos[0], nil
	default:
		ids := make([]string, len(infos))
		for i, info := range infos {
			ids[i] = info.ID
		}
		return containers.Container{}, r.wrap(op, ref, adapterkit.WithKind(nil, "the name %q is carried by %d containers (%v): give an ID", ref, len(ids), ids))
	}
}
