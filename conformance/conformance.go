package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// Fixtures are the images the suite runs, served by the loopback registry
// that `make env` starts.
type Fixtures struct {
	// Registry is the loopback registry, "127.0.0.1:PORT"
	// (SANDBOXER_REGISTRY). Without it the pull semantics cannot run.
	Registry string
	// Busybox is a busybox image ref in that registry
	// (SANDBOXER_IMAGE_BUSYBOX).
	Busybox string
	// BusyboxVolume is the same image plus VOLUME /data
	// (SANDBOXER_IMAGE_BUSYBOX_VOLUME).
	BusyboxVolume string
}

// FixturesFromEnv reads the fixtures from the environment and
// build/images.env. A missing image ends the test through
// testenv.Unavailable (a skip, or a failure when SANDBOXER_REQUIRE names
// the runtime); a missing registry only ends the pull semantics, later.
func FixturesFromEnv(t testing.TB, runtime string) Fixtures {
	t.Helper()
	return Fixtures{
		Registry:      testenv.Getenv("SANDBOXER_REGISTRY"),
		Busybox:       testenv.Image(t, runtime, "busybox"),
		BusyboxVolume: testenv.Image(t, runtime, "busybox_volume"),
	}
}

// Config is what an adapter's TestConformance hands to Run.
type Config struct {
	// Runtime names the backend: "docker", "podman" or "containerd". The
	// subtests are TestConformance/<Runtime>/<Semantic>.
	Runtime string
	// Row names the subtests instead of Runtime when the same adapter runs
	// against a second kind of backend ("podman-rootless"): they are then
	// TestConformance/<Row>/<Semantic>. Empty: Runtime.
	Row string
	// New connects to the backend (or ends the test with
	// testenv.Unavailable) and registers Close in t.Cleanup.
	New func(t testing.TB) runtime.ContainerRuntime
	// Fixtures are the images and the registry the suite uses.
	Fixtures Fixtures
	// Volumes lists the backend's volume names; the anonymous-volume
	// semantic compares it before, during and after a container's life.
	Volumes func(ctx context.Context) ([]string, error)
	// Images lists the image refs ("repo:tag") as the runtime's own CLI
	// shows them (docker image ls, podman images, ctr images ls); the
	// image semantics check loads and removals against it.
	Images func(ctx context.Context) ([]string, error)
	// HostDataDirs are where the backend keeps container filesystems on
	// the host (e.g. /var/lib/docker); the tmpfs semantic proves that a
	// file written to a tmpfs path appears under none of them.
	HostDataDirs []string
	// ContainerIDs lists the full ID of every container of the backend,
	// in any state, as the runtime's own CLI lists them (docker ps -aq
	// --no-trunc, podman ps -aq --no-trunc, ctr containers ls -q): what
	// IDsAreNeverReused checks is left.
	ContainerIDs func(ctx context.Context) ([]string, error)
	// StoredMounts reads a container's mounts as the backend stored them,
	// with the backend's own API, not through the adapter: Docker's and
	// Podman's inspect, the OCI spec containerd keeps (Container.Spec).
	// Type is the mount's type as stored ("bind", "volume", "tmpfs",
	// "proc", ...).
	StoredMounts func(ctx context.Context, id string) ([]runtime.Mount, error)
	// OwnIDs, when set, gives the other IDs by which the backend names its
	// own per-container files (a pod's CRI sandbox: the kubelet's
	// /etc/hostname and /etc/resolv.conf come from its directory), read
	// with the backend's own API; nil: the container's ID alone.
	OwnIDs func(ctx context.Context, id string) ([]string, error)
	// Gaps lists the row's known gaps in the contract: a subtest's path
	// below the row (e.g. "NetworksAreIsolated/DefaultToNetwork") -> why
	// the backend cannot close it yet. A listed subtest does not skip: it
	// asserts that the gap is still there (the connection the contract
	// forbids does succeed) and logs the reason, so that the day the gap
	// closes it fails and the entry must go. Every entry must name a
	// semantic of the suite and give a reason.
	Gaps map[string]string
	// Lapses lists the row's known intermittent lapses in the isolation
	// contract, by the same subtest paths as Gaps -> why: the backend
	// refuses the forbidden connection, but drops its refusal now and
	// then until its next container start on an isolated network (a race
	// with the backend's own teardown of another network). A listed
	// subtest that finds the connection allowed starts a container on the
	// client's network and tries again, a bounded number of times; it
	// fails when the refusal never holds. Entries are checked as Gaps'.
	Lapses map[string]string
}

// semantic is one behaviour of the port, proven by one subtest.
type semantic struct {
	name string
	test func(t *testing.T, s *suite)
}

// semantics is the checklist, in the order of the design's list. The
// package documentation lists the same names.
var semantics = []semantic{
	{"ImageExistsPullExists", testImageExistsPullExists},
	{"PullMissingIsImageNotFound", testPullMissingIsImageNotFound},
	{"RunAbsentImageIsImageNotFound", testRunAbsentImageIsImageNotFound},
	{"ImageIDIsConfigDigest", testImageIDIsConfigDigest},
	{"ImageConfigIsTheRegistrys", testImageConfigIsTheRegistrys},
	{"SaveLoadRoundTrip", testSaveLoadRoundTrip},
	{"RemoveImageInUseKeepsContainer", testRemoveImageInUseKeepsContainer},
	{"LoadMalformedLeavesNothing", testLoadMalformedLeavesNothing},
	{"RunHonoursNameEnvCommandLabels", testRunHonoursNameEnvCommandLabels},
	{"InvalidSpecIsRejectedAlike", testInvalidSpecIsRejectedAlike},
	{"TmpfsIsTmpfsAndNotOnHostDisk", testTmpfsIsTmpfsAndNotOnHostDisk},
	{"MemoryCPUPidsLimitsInCgroup", testMemoryCPUPidsLimitsInCgroup},
	{"RunHonoursUlimits", testRunHonoursUlimits},
	{"ExecStdoutStderrExitCodeEnv", testExecStdoutStderrExitCodeEnv},
	{"StopAfterGraceWhenTERMIgnored", testStopAfterGraceWhenTERMIgnored},
	{"KillStopsAtOnce", testKillStopsAtOnce},
	{"OOMKillIsReported", testOOMKillIsReported},
	{"InspectAbsentIsNotFound", testInspectAbsentIsNotFound},
	{"ExecStopKillAbsentAreNotFound", testExecStopKillAbsentAreNotFound},
	{"RunDuplicateNameIsAlreadyExists", testRunDuplicateNameIsAlreadyExists},
	{"RemoveAbsentIsNoError", testRemoveAbsentIsNoError},
	{"IDsAreNeverReused", testIDsAreNeverReused},
	{"StopStoppedIsNoError", testStopStoppedIsNoError},
	{"ListBySelectorAcrossStates", testListBySelectorAcrossStates},
	{"SnapshotMatchesListAndKnowsEveryContainer", testSnapshotMatchesListAndKnowsEveryContainer},
	{"SiblingReachability", testSiblingReachability},
	{"PublishedPortLoopbackOnly", testPublishedPortLoopbackOnly},
	{"CreateNetworkDuplicateIsAlreadyExists", testCreateNetworkDuplicateIsAlreadyExists},
	{"RemoveNetworkAbsentIsNoError", testRemoveNetworkAbsentIsNoError},
	{"ListNetworksRoundTripsLabels", testListNetworksRoundTripsLabels},
	{"RemoveNetworkInUseIsErrInUse", testRemoveNetworkInUseIsErrInUse},
	{"NetworksAreIsolated", testNetworksAreIsolated},
	{"InternalNetworkHasNoRouteOut", testInternalNetworkHasNoRouteOut},
	{"InternalRefusesPublishedPorts", testInternalRefusesPublishedPorts},
	{"ManyNetworksFit", testManyNetworksFit},
	{"NoSocketHostMountOrPrivilege", testNoSocketHostMountOrPrivilege},
	{"ConfinedToTheSpecsCapabilities", testConfinedToTheSpecsCapabilities},
	{"RemoveDeletesAnonymousVolumes", testRemoveDeletesAnonymousVolumes},
	{"ParallelRunRemoveLeavesNothing", testParallelRunRemoveLeavesNothing},
}

// Run runs every semantic against the runtime that cfg.New connects to, as
// subtests TestConformance/<cfg.Row or cfg.Runtime>/<Semantic>. Call it from a test
// named TestConformance.
func Run(t *testing.T, cfg Config) {
	testkit.RequireRuntime(t)
	row := cfg.Row
	if row == "" {
		row = cfg.Runtime
	}
	t.Run(row, func(t *testing.T) {
		s := setUp(t, cfg)
		for _, sem := range semantics {
			t.Run(sem.name, func(t *testing.T) { sem.test(t, s) })
		}
		t.Run("LeavesNothingBehind", s.testLeavesNothingBehind)
	})
}

// setUp checks the config, connects, makes sure the fixture images are
// present and arms a last-resort sweep of everything labelled with this
// run's id.
func setUp(t *testing.T, cfg Config) *suite {
	t.Helper()
	require.NotEmpty(t, cfg.Runtime, "Config.Runtime")
	require.NotNil(t, cfg.New, "Config.New")
	require.NotEmpty(t, cfg.Fixtures.Busybox, "Config.Fixtures.Busybox")
	require.NotEmpty(t, cfg.Fixtures.BusyboxVolume, "Config.Fixtures.BusyboxVolume")
	require.NotNil(t, cfg.StoredMounts, "Config.StoredMounts")
	checkGaps(t, cfg.Gaps)
	checkGaps(t, cfg.Lapses)

	rt := cfg.New(t)
	require.NotNil(t, rt, "Config.New returned no runtime")
	require.Equal(t, cfg.Runtime, rt.Name(), "the runtime's Name must be Config.Runtime")

	s := &suite{cfg: cfg, rt: rt, runID: randomHex(4)}
	t.Logf("conformance run %s against %s at %s", s.runID, rt.Name(), rt.Endpoint())

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	info, err := rt.Version(ctx)
	require.NoError(t, err, "version")
	s.info = info
	s.forms = runtime.FormsOf(rt)
	s.images, _ = runtime.As[runtime.ImageStore](rt)
	if s.images == nil {
		t.Logf("%s has no image store (no runtime.ImageStore): the image semantics assert that Run pulls instead", rt.Name())
	}
	if s.forms != (runtime.Forms{}) {
		t.Logf("%s gives these guarantees in another form, which the semantics assert instead: %+v", rt.Name(), s.forms)
	}
	t.Logf("%s %s (API %s), cgroup v%s, rootless=%v", info.Runtime, info.Version, info.APIVersion, info.CgroupVersion, info.Rootless)

	for _, ref := range []string{cfg.Fixtures.Busybox, cfg.Fixtures.BusyboxVolume} {
		testkit.EnsureImage(t, rt, ref)
	}

	// A last resort: the subtests' own cleanups should have left nothing
	// labelled with this run's id, which LeavesNothingBehind asserts.
	// Registered after New, so it runs before the runtime is closed.
	testkit.CleanupLabelled(t, rt, map[string]string{runLabel: s.runID})
	return s
}

// testLeavesNothingBehind: once every semantic has run and cleaned up, no
// container labelled with this run's id exists, in any state, and no
// network so labelled is listed.
func (s *suite) testLeavesNothingBehind(t *testing.T) {
	ctx := testContext(t)
	left, err := s.rt.List(ctx, map[string]string{runLabel: s.runID})
	require.NoError(t, err)
	assert.Empty(t, containerNames(left), "containers left behind by run %s", s.runID)
	assert.Empty(t, keys(s.listNetworks(t, ctx, map[string]string{runLabel: s.runID})), "networks left behind by run %s", s.runID)
}
