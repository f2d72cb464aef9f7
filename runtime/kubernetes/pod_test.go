package kubernetes

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/roboco/sandboxer/runtime"
)

func TestValidatePodName(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"roboco-sandbox-pg-42", true},
		{"a.b-c", true},
		{"Upper", false},
		{"under_score", false},
		{"-lead", false},
		{strings.Repeat("a", runtime.MaxNameLength+1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := validatePodName(tc.name)
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, runtime.ErrInvalid)
			assert.Contains(t, err.Error(), tc.name[:min(len(tc.name), 20)], "the error names the name")
		})
	}
}

func TestLabelsRoundTrip(t *testing.T) {
	in := map[string]string{
		"sandboxer.sandbox":          "1",
		"sbx.conf/key":               "abc",
		"sbx.conf/empty":             "",
		"sandboxer.conformance.test": "TestConformance/kubernetes/X",
		"sbx.conf/spaces":            " a b = c ",
		"sbx.conf/unicode":           "ünï ✓",
		"roboco.sandbox.owner":       "pid:boot:1:2",
		"not a key":                  "v",
		"sbx.conf/long":              strings.Repeat("x", 64),
	}
	labels, annotations, err := splitLabels(in)
	require.NoError(t, err)
	for _, k := range []string{"sandboxer.sandbox", "sbx.conf/key", "sbx.conf/empty"} {
		assert.Equal(t, in[k], labels[k], "%s is a pod label", k)
	}
	for _, k := range []string{"sandboxer.conformance.test", "sbx.conf/spaces", "not a key", "sbx.conf/long", "roboco.sandbox.owner"} {
		assert.NotContains(t, labels, k, "%s cannot be a pod label", k)
	}
	meta := metav1.ObjectMeta{Labels: labels, Annotations: annotations}
	meta.Labels[networkLabel] = "net"
	assert.Equal(t, in, joinLabels(meta), "the caller sees exactly its labels")

	_, _, err = splitLabels(map[string]string{networkLabel: "x"})
	assert.ErrorIs(t, err, runtime.ErrInvalid, "the adapter's own prefix")
}

func TestMatchesSelectsAnnotationKeptLabels(t *testing.T) {
	labels, annotations, err := splitLabels(map[string]string{"a": "1", "owner": "x:y"})
	require.NoError(t, err)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}}
	cases := []struct {
		selector map[string]string
		want     bool
	}{
		{nil, true},
		{map[string]string{"a": "1"}, true},
		{map[string]string{"owner": "x:y"}, true},
		{map[string]string{"a": "1", "owner": "x:y"}, true},
		{map[string]string{"owner": "x:"}, false},
		{map[string]string{"a": "2"}, false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, matches(p, tc.selector), "%v", tc.selector)
	}
}

func TestTmpfsSize(t *testing.T) {
	cases := []struct {
		opts    string
		want    int64
		wantErr bool
	}{
		{"", 0, false},
		{"rw", 0, false},
		{"rw,size=16m", 16 << 20, false},
		{"size=512k", 512 << 10, false},
		{"size=1G", 1 << 30, false},
		{"size=4096", 4096, false},
		{"rw,size=16m,mode=750", 0, true},
		{"ro", 0, true},
		{"size=", 0, true},
		{"size=-1m", 0, true},
		{"size=9007199254740992k", 0, true}, // 2^63 bytes: overflowed to a negative size, and no sizeLimit
	}
	for _, tc := range cases {
		t.Run(tc.opts, func(t *testing.T) {
			got, err := tmpfsSize(tc.opts)
			if tc.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCheckSpecRefusesWhatAPodCannotHold(t *testing.T) {
	base := runtime.RunSpec{Name: "sbx-a", Image: "busybox"}
	cases := []struct {
		name   string
		modify func(*runtime.RunSpec)
		kind   error
	}{
		{"Ports", func(s *runtime.RunSpec) { s.Ports = []runtime.PortSpec{{ContainerPort: 80}} }, runtime.ErrUnsupported},
		{"Pids", func(s *runtime.RunSpec) { s.PidsLimit = 10 }, runtime.ErrUnsupported},
		{"Ulimits", func(s *runtime.RunSpec) { s.Ulimits = []runtime.Ulimit{{Name: "nofile", Soft: 1, Hard: 1}} }, runtime.ErrUnsupported},
		{"TmpfsMode", func(s *runtime.RunSpec) { s.Tmpfs = map[string]string{"/x": "mode=700"} }, runtime.ErrUnsupported},
		{"TinyCPU", func(s *runtime.RunSpec) { s.CPUs = 0.0001 }, runtime.ErrUnsupported},
		{"UpperName", func(s *runtime.RunSpec) { s.Name = "Sbx" }, runtime.ErrInvalid},
		{"EnvName", func(s *runtime.RunSpec) { s.Env = map[string]string{"A-B": "x"} }, runtime.ErrInvalid},
		{"NetworkName", func(s *runtime.RunSpec) { s.Network = "Net_1" }, runtime.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := base
			tc.modify(&spec)
			assert.ErrorIs(t, checkSpec(spec), tc.kind)
		})
	}
	assert.NoError(t, checkSpec(base))
}

func TestBuildPod(t *testing.T) {
	r := &Runtime{namespace: "ns", node: "n1"}
	spec := runtime.RunSpec{
		Name: "sbx-a", Image: "img", Entrypoint: []string{"sh"}, Command: []string{"-c", "x"},
		Env:         map[string]string{"PASSWORD": "s3cret"},
		Labels:      map[string]string{"a": "1", "o": "x:y"},
		Tmpfs:       map[string]string{"/data": "size=16m", "/b": ""},
		MemoryBytes: 64 << 20, CPUs: 0.5, Network: "net",
	}
	pod, err := r.buildPod(spec, false)
	require.NoError(t, err)
	ps := pod.Spec
	assert.Equal(t, corev1.RestartPolicyNever, ps.RestartPolicy)
	assert.False(t, *ps.AutomountServiceAccountToken)
	assert.False(t, *ps.EnableServiceLinks)
	assert.Equal(t, "n1", ps.NodeName)
	require.Len(t, ps.Containers, 1)
	c := ps.Containers[0]
	assert.Equal(t, []string{"sh"}, c.Command)
	assert.Equal(t, []string{"-c", "x"}, c.Args)
	assert.Empty(t, c.Env, "no env in the pod spec")
	require.Len(t, c.EnvFrom, 1)
	assert.Equal(t, "sbx-a"+secretSuffix, c.EnvFrom[0].SecretRef.Name)
	assert.NotContains(t, pod.String(), "s3cret", "the password is nowhere in the pod")
	assert.Equal(t, "64Mi", c.Resources.Limits.Memory().String())
	assert.Equal(t, "500m", c.Resources.Limits.Cpu().String())
	assert.Equal(t, "64Mi", c.Resources.Requests.Memory().String(), "the memory request is the limit")
	assert.Equal(t, "50m", c.Resources.Requests.Cpu().String(), "the CPU request is a tenth of the limit")
	require.Len(t, ps.Volumes, 2)
	assert.Equal(t, "/b", c.VolumeMounts[0].MountPath)
	assert.Nil(t, ps.Volumes[0].EmptyDir.SizeLimit)
	assert.Equal(t, "/data", c.VolumeMounts[1].MountPath)
	assert.Equal(t, corev1.StorageMediumMemory, ps.Volumes[1].EmptyDir.Medium)
	assert.Equal(t, "16Mi", ps.Volumes[1].EmptyDir.SizeLimit.String())
	assert.Equal(t, "net", pod.Labels[networkLabel])

	created, err := r.buildPod(spec, true)
	require.NoError(t, err)
	assert.Empty(t, created.Spec.NodeName, "a created pod is not bound")
	assert.Equal(t, []corev1.PodSchedulingGate{{Name: createdGate}}, created.Spec.SchedulingGates)

	s := r.buildSecret(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sbx-a", UID: "u1"}}, spec.Env)
	assert.Equal(t, "sbx-a"+secretSuffix, s.Name)
	require.Len(t, s.OwnerReferences, 1)
	assert.Equal(t, "u1", string(s.OwnerReferences[0].UID), "owned by the pod")
}

func TestToContainerStates(t *testing.T) {
	term := func(code int32, reason string) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}
	}
	cases := []struct {
		name     string
		status   corev1.PodStatus
		want     runtime.State
		wantCode int
		wantOOM  bool
	}{
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, runtime.StateCreated, 0, false},
		{"running", corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.9"}, runtime.StateRunning, 0, false},
		{"running, container ended", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: term(3, "Error")}, runtime.StateExited, 3, false},
		{"succeeded", corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: term(0, "Completed")}, runtime.StateExited, 0, false},
		{"oom", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: term(137, "OOMKilled")}, runtime.StateExited, 137, true},
		{"unknown", corev1.PodStatus{Phase: corev1.PodUnknown}, runtime.StateUnknown, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := toContainer(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u", Labels: map[string]string{networkLabel: "net"}}, Status: tc.status})
			assert.Equal(t, tc.want, c.State)
			assert.Equal(t, tc.wantCode, c.ExitCode)
			assert.Equal(t, tc.wantOOM, c.OOMKilled)
			assert.Equal(t, "u", c.ID, "the ID is the pod's UID")
			if tc.status.PodIP != "" {
				assert.Equal(t, map[string]string{DefaultNetwork: "10.244.0.9", "net": "10.244.0.9"}, c.Networks)
			}
		})
	}
}

func TestExecArgvKeepsEnvOutOfArgv(t *testing.T) {
	value := "a b 'q' \"dq\" $HOME\nsecond line"
	argv, stdin, err := execArgv(runtime.ExecSpec{Cmd: []string{"printenv", "X"}, Env: map[string]string{"X": value}})
	require.NoError(t, err)
	assert.Equal(t, []string{"sh", "-s", "--", "printenv", "X"}, argv)
	assert.NotContains(t, strings.Join(argv, " "), "second line", "the value is not in argv")
	require.NotNil(t, stdin)

	argv, stdin, err = execArgv(runtime.ExecSpec{Cmd: []string{"true"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"true"}, argv)
	assert.Nil(t, stdin, "no env, no stdin")

	_, _, err = execArgv(runtime.ExecSpec{Cmd: []string{"true"}, Env: map[string]string{"A=B": "x"}})
	assert.ErrorIs(t, err, runtime.ErrInvalid)
}

func TestStartState(t *testing.T) {
	waiting := func(reason string) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}
	}
	running := []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	ended := []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}
	cases := []struct {
		name     string
		status   corev1.PodStatus
		wantDone bool
		wantKind error
		wantErr  bool
	}{
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, false, nil, false},
		{"creating", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: waiting("ContainerCreating")}, false, nil, false},
		{"pull failed", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: waiting("ErrImagePull")}, false, runtime.ErrImageNotFound, true},
		{"pull backoff", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: waiting("ImagePullBackOff")}, false, runtime.ErrImageNotFound, true},
		{"cannot create", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: waiting("CreateContainerError")}, false, nil, true},
		{"running without an IP yet", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: running}, false, nil, false},
		{"running", corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.2", ContainerStatuses: running}, true, nil, false},
		{"ran and ended", corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: ended}, true, nil, false},
		{"refused by the node", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfmemory"}, false, nil, true},
		{"unschedulable", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}, false, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Image: "img"}}}, Status: tc.status}
			done, _, err := startState(p)
			assert.Equal(t, tc.wantDone, done)
			if !tc.wantErr {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			if tc.wantKind != nil {
				assert.ErrorIs(t, err, tc.wantKind)
			}
		})
	}
}

func TestBuildPodOnThePodNetworkHasNoNetworkLabel(t *testing.T) {
	r := &Runtime{namespace: "ns"}
	pod, err := r.buildPod(runtime.RunSpec{Name: "sbx-a", Image: "img", Network: DefaultNetwork}, false)
	require.NoError(t, err)
	assert.NotContains(t, pod.Labels, networkLabel, "the cluster's pod network is no network of sandboxer's")
	pod, err = r.buildPod(runtime.RunSpec{Name: "sbx-b", Image: "img", Network: "mine"}, false)
	require.NoError(t, err)
	assert.Equal(t, "mine", pod.Labels[networkLabel])
}

func TestNextPollGrowsToItsCap(t *testing.T) {
	d, seen := firstPoll, []time.Duration{firstPoll}
	for range 10 {
		d = nextPoll(d)
		seen = append(seen, d)
	}
	assert.Equal(t, []time.Duration{20 * time.Millisecond, 30 * time.Millisecond, 45 * time.Millisecond}, seen[:3])
	assert.Equal(t, pollInterval, seen[len(seen)-1], "capped")
}

// TestBuildPodConfines: every pod gets the securityContext of the port's
// confinement, the one the Pod Security Standards' baseline admits:
// RuntimeDefault seccomp, no privilege escalation, drop ALL and add the
// spec's capabilities only (none when it asks for none).
func TestBuildPodConfines(t *testing.T) {
	r := &Runtime{namespace: "ns", node: "n"}
	for _, tc := range []struct {
		name string
		caps []string
		want []corev1.Capability
	}{
		{"NoCapabilities", nil, []corev1.Capability{}},
		{"TheSpecsCapabilities", []string{"cap_setuid", "CHOWN"}, []corev1.Capability{"CHOWN", "SETUID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := runtime.RunSpec{Name: "p1", Image: "i", Capabilities: tc.caps}.Normalize()
			require.NoError(t, err)
			pod, err := r.buildPod(spec, false)
			require.NoError(t, err)
			require.NotNil(t, pod.Spec.SecurityContext)
			assert.Equal(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}, pod.Spec.SecurityContext.SeccompProfile)
			require.Len(t, pod.Spec.Containers, 1)
			sc := pod.Spec.Containers[0].SecurityContext
			require.NotNil(t, sc)
			assert.Equal(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}, sc.SeccompProfile)
			require.NotNil(t, sc.AllowPrivilegeEscalation)
			assert.False(t, *sc.AllowPrivilegeEscalation)
			require.NotNil(t, sc.Privileged)
			assert.False(t, *sc.Privileged)
			require.NotNil(t, sc.Capabilities)
			assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
			assert.Equal(t, tc.want, sc.Capabilities.Add)
		})
	}
}
