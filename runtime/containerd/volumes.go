package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	cfs "github.com/containerd/continuity/fs"
	cerrdefs "github.com/containerd/errdefs"
	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/opencontainers/image-spec/identity"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// containerd has no volumes. An image's VOLUME that no tmpfs covers becomes
// an anonymous volume the containerd way: an empty snapshot (no parent)
// seeded with the image's content at that path, as Docker seeds a new
// volume, and mounted there. The container references it with a
// garbage-collection label, and Remove deletes it.

const (
	// volumeKeyPrefix starts the snapshot key of every anonymous volume:
	// sandboxer-volume/<container id>/<hash of the path>.
	volumeKeyPrefix = "sandboxer-volume/"
	// volumeLabel marks a volume snapshot with its container's id.
	volumeLabel = "sandboxer.volume/container"
	// gcSnapshotRef is the container label prefix that keeps a snapshot
	// from containerd's garbage collector while the container exists.
	gcSnapshotRef = "containerd.io/gc.ref.snapshot."
)

// volume is an anonymous volume of a container.
type volume struct {
	// Destination is the path inside the container.
	Destination string `json:"destination"`
	// Key is the volume's snapshot key, which is also its name.
	Key string `json:"key"`
}

// volumesFor lists the image's VOLUMEs that no tmpfs covers, in path order,
// with their snapshot keys.
func volumesFor(id string, imageVolumes map[string]struct{}, tmpfs map[string]string) []volume {
	var out []volume
	for p := range imageVolumes {
		dest := path.Clean("/" + p)
		if _, covered := tmpfs[dest]; covered {
			continue
		}
		sum := sha256.Sum256([]byte(dest))
		out = append(out, volume{Destination: dest, Key: volumeKeyPrefix + id + "/" + hex.EncodeToString(sum[:6])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Destination < out[j].Destination })
	return out
}

// prepareVolumes creates the volumes' snapshots, seeds each with the
// image's content at its path, and returns their mounts for the spec and
// the labels that make the container reference them. ctx must hold a
// lease. On error, the snapshots made so far are removed.
func (r *Runtime) prepareVolumes(ctx context.Context, id string, img client.Image, vols []volume) (_ []specs.Mount, _ map[string]string, retErr error) {
	if len(vols) == 0 {
		return nil, nil, nil
	}
	sn := r.client.SnapshotService(r.snapshotter)
	var made []string
	defer func() {
		if retErr != nil {
			for _, key := range made {
				_ = sn.Remove(context.WithoutCancel(ctx), key)
			}
		}
	}()

	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		return nil, nil, err
	}
	parent := identity.ChainID(diffIDs).String()
	viewKey := volumeKeyPrefix + id + "/image-view"
	view, err := sn.View(ctx, viewKey, parent)
	if err != nil {
		return nil, nil, fmt.Errorf("view the image's filesystem: %w", err)
	}
	defer func() { _ = sn.Remove(context.WithoutCancel(ctx), viewKey) }()

	var mounts []specs.Mount
	labels := map[string]string{}
	for i, v := range vols {
		ms, err := sn.Prepare(ctx, v.Key, "", snapshots.WithLabels(map[string]string{volumeLabel: id}))
		if err != nil {
			return nil, nil, fmt.Errorf("volume %s: %w", v.Destination, err)
		}
		made = append(made, v.Key)
		if len(ms) != 1 || ms[0].Type != "bind" {
			return nil, nil, fmt.Errorf("volume %s: snapshotter %s gives %d mounts, not one bind mount", v.Destination, r.snapshotter, len(ms))
		}
		if err := seedVolume(ctx, view, ms, v.Destination); err != nil {
			return nil, nil, fmt.Errorf("volume %s: seed it from the image: %w", v.Destination, err)
		}
		mounts = append(mounts, specs.Mount{
			Destination: v.Destination,
			Type:        "bind",
			Source:      ms[0].Source,
			Options:     ms[0].Options,
		})
		labels[fmt.Sprintf("%s%s/volume%d", gcSnapshotRef, r.snapshotter, i)] = v.Key
	}
	return mounts, labels, nil
}

// seedVolume copies the image's content at dest (if it is a directory) into
// the volume, with its owner and mode, as Docker does for a new volume.
func seedVolume(ctx context.Context, image, volume []mount.Mount, dest string) error {
	return mount.WithReadonlyTempMount(ctx, image, func(root string) error {
		src, err := securejoin.SecureJoin(root, dest)
		if err != nil {
			return err
		}
		st, err := os.Stat(src)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && !st.IsDir()) {
			return nil
		}
		if err != nil {
			return err
		}
		return mount.WithTempMount(ctx, volume, func(vroot string) error {
			return cfs.CopyDir(vroot, src)
		})
	})
}

// removeVolumes deletes a container's volume snapshots; absent ones are
// fine.
func (r *Runtime) removeVolumes(ctx context.Context, vols []volume) error {
	sn := r.client.SnapshotService(r.snapshotter)
	var errs []error
	for _, v := range vols {
		if err := sn.Remove(ctx, v.Key); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("volume %s (%s): %w", v.Destination, v.Key, err))
		}
	}
	return errors.Join(errs...)
}

// Volumes lists the names (snapshot keys) of the anonymous volumes in the
// adapter's namespace.
func (r *Runtime) Volumes(ctx context.Context) ([]string, error) {
	ctx = r.ctx(ctx)
	var keys []string
	err := r.client.SnapshotService(r.snapshotter).Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		keys = append(keys, info.Name)
		return nil
	}, fmt.Sprintf(`labels."%s"`, volumeLabel))
	if err != nil {
		return nil, r.wrap("list volumes", r.namespace, err)
	}
	sort.Strings(keys)
	return keys, nil
}
