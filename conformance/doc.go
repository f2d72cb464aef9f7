// Package conformance is the one test suite that every runtime adapter
// runs: same inputs, same outcomes. It proves that a backend behind
// runtime.ContainerRuntime honours the sibling-container semantics of the
// design, against the real daemon (nothing is mocked), so that the
// lifecycle code above the port never has to know which runtime it drives.
//
// An adapter calls it from a test named TestConformance:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Config{
//			Runtime:      "docker",
//			New:          func(t testing.TB) runtime.ContainerRuntime { ... },
//			Fixtures:     conformance.FixturesFromEnv(t, "docker"),
//			Volumes:      func(ctx context.Context) ([]string, error) { ... },
//			HostDataDirs: []string{"/var/lib/docker"},
//		})
//	}
//
// Every semantic is its own subtest, so `go test -v` reads as a checklist,
// TestConformance/<runtime>/<Semantic>:
//
//   - ImageExistsPullExists: a ref absent locally is not there, pulls from
//     the loopback registry with progress, and is there afterwards.
//   - PullMissingIsImageNotFound: pulling a ref the registry does not have
//     is ErrImageNotFound.
//   - RunAbsentImageIsImageNotFound: Run does not pull; an absent image is
//     ErrImageNotFound and leaves no container behind.
//   - ImageIDIsConfigDigest: ImageID is the config digest the registry
//     serves; ImageID and SaveImage of an absent image are ErrImageNotFound.
//   - ImageConfigIsTheRegistrys: ImageConfig's Env and VOLUMEs are those of
//     the config the registry serves; an absent image is ErrImageNotFound.
//   - SaveLoadRoundTrip: a saved image with one more layer (appended by
//     go-containerregistry) loads under its tag, shows in the runtime's own
//     image list, has its config digest as ID and runs with the new file.
//   - RemoveImageInUseKeepsContainer: removing the tag of a running
//     container's image succeeds; the container keeps running.
//   - LoadMalformedLeavesNothing: not a tar, truncated, a missing layer:
//     ErrInvalid, and no image under the archive's tag.
//   - RunHonoursNameEnvCommandLabels: name, env, entrypoint/command and
//     labels (exact round trip) are what the container gets and what
//     inspect and list report.
//   - InvalidSpecIsRejectedAlike: every input rule of the port gives
//     ErrInvalid on run and create, leaving nothing; defaults are filled.
//   - TmpfsIsTmpfsAndNotOnHostDisk: tmpfs paths are tmpfs inside, with
//     their options, and a file written there appears nowhere under the
//     backend's host data directories.
//   - MemoryCPUPidsLimitsInCgroup: memory, (fractional) CPU and pids
//     limits are in the container's cgroup files (v1 or v2; a rootless
//     runtime on cgroup v2 included, with its controllers delegated). A
//     rootless runtime on cgroup v1, which cannot enforce them, refuses
//     each as ErrUnsupported on run and create, leaving nothing.
//   - RunHonoursUlimits: rlimits are those of the container's processes.
//   - ExecStdoutStderrExitCodeEnv: exec returns stdout, stderr and the exit
//     code, passes env and user.
//   - StopAfterGraceWhenTERMIgnored: stop waits out the grace, then kills.
//   - KillStopsAtOnce: kill does not wait for a grace.
//   - OOMKillIsReported: a container killed for memory exits 137 and reads
//     as OOM-killed in inspect, list and snapshot where the backend reports
//     OOM kills (Info.ReportsOOMKill), and never claims it where not.
//   - InspectAbsentIsNotFound: inspect of an absent container is
//     ErrNotFound, and the error names the runtime and the container.
//   - ExecStopKillAbsentAreNotFound: the other verbs on an absent container
//     are ErrNotFound too.
//   - RunDuplicateNameIsAlreadyExists: a second run under a live name is
//     ErrAlreadyExists and leaves the first container untouched.
//   - RemoveAbsentIsNoError: remove is idempotent.
//   - IDsAreNeverReused: a remove by ID kills and removes that container
//     with its anonymous volumes; a newer container under the same name
//     gets another ID, and the old ID names nothing (inspect:
//     ErrNotFound) and, removed again, never reaches the newer one.
//   - StopStoppedIsNoError: stop and kill of an exited container succeed.
//   - ListBySelectorAcrossStates: list returns exactly the containers whose
//     labels match every pair, created, running and exited alike.
//   - SnapshotMatchesListAndKnowsEveryContainer: a snapshot's matches are
//     list's, and it knows every existing container by name and ID.
//   - SiblingReachability: a container on a network is reachable from
//     another one on it, at the address inspect reports.
//   - PublishedPortLoopbackOnly: a published port defaults to 127.0.0.1 and
//     an ephemeral host port, is reachable from the host, listens on no
//     other address, every DNAT rule of the host's nat table for it
//     matches destination 127.0.0.1 only (one of the two must publish it),
//     and every host bridge address refuses it.
//   - CreateNetworkDuplicateIsAlreadyExists: network names are unique.
//   - RemoveNetworkAbsentIsNoError: network removal is idempotent.
//   - ListNetworksRoundTripsLabels: ListNetworks returns exactly the
//     networks whose labels match the selector, with their labels as
//     created, the created ID, Internal as asked and a subnet inside
//     SANDBOXER_SUBNET_POOL (none where runtime.Forms.NoNetworkSubnets);
//     never the runtime's default network.
//   - RemoveNetworkInUseIsErrInUse: removing a network a container is on
//     is ErrInUse and leaves it as it was (listed, same ID, its
//     containers still reach each other); once they are gone it goes.
//   - NetworksAreIsolated: a container reaches its neighbour on its
//     network, and nothing on another network or on the default network,
//     in either direction, at any address inspect reports (busybox wget).
//   - InternalNetworkHasNoRouteOut: a container on an internal network
//     reaches its neighbour there, and neither the host (a listener of the
//     test's on every IPv4 address) nor the default network.
//   - InternalRefusesPublishedPorts: a published port on an internal
//     network is ErrInvalid, and nothing is made.
//   - ManyNetworksFit: 40 networks (more than Docker's default pools
//     hold) are created with distinct subnets from the pool, and removed.
//   - NoSocketHostMountOrPrivilege: no runtime socket, host-path mount,
//     privileged mode or full capability set that nobody asked for; the
//     mounts as the backend stored them (Config.StoredMounts) and in the
//     container's /proc/self/mountinfo.
//   - ConfinedToTheSpecsCapabilities: the runtime's default seccomp
//     filter, no_new_privs, and the run spec's capabilities and no other
//     (bounding set included), in /proc/1/status and an exec's
//     /proc/self/status; NET_RAW and SYS_ADMIN refused as ErrInvalid.
//   - RemoveDeletesAnonymousVolumes: an image's VOLUME leaves no volume
//     behind once the container is removed.
//   - ParallelRunRemoveLeavesNothing: concurrent runs and removes leave
//     nothing behind.
//   - LeavesNothingBehind: after all of the above, nothing labelled with
//     this run's id is left.
//
// A backend whose model has no room for some guarantee of the port (a
// Kubernetes pod cannot be stopped and kept, nor publish a port on the
// provisioner's loopback, and the kubelet, not the API, pulls images)
// says so in runtime.Forms (runtime.FormsOf), and the semantic asserts the
// other form instead, never a skip. A backend without an image store (no
// runtime.ImageStore) has Run pull (a missing ref still ErrImageNotFound); a published port is
// ErrUnsupported and the server is reached at its reported address; pids,
// ulimits, tmpfs options but size, and exec as a user are ErrUnsupported,
// leaving nothing; Stop and Kill leave the container gone (Stop still
// after the grace).
//
// A row's known gaps in the contract (Config.Gaps, by subtest path) are
// asserted the other way round: the forbidden connection still succeeds,
// with the reason logged, so the entry must go the day the gap closes.
//
// Every container and network the suite creates has a unique name
// (sbx-conf-<run id>-<random>) and the label sandboxer.conformance=<run id>,
// and is removed by a cleanup registered before it is created, so a
// failing subtest leaves nothing behind either.
package conformance
