package kubernetes

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

const (
	// internalPrefix starts the label and annotation keys the adapter
	// keeps for itself; a caller's label may not use it.
	internalPrefix = "sandboxer.internal/"
	// labelsAnnotation holds, as JSON, the caller's labels that are not
	// valid Kubernetes labels.
	labelsAnnotation = internalPrefix + "labels"
	// networkLabel is the network a pod joined (CreateNetwork's name).
	networkLabel = internalPrefix + "network"
	// managedLabel marks the Secrets and ConfigMaps the adapter made, so
	// that it never deletes anything else.
	managedLabel = internalPrefix + "managed"
	// createdGate holds a pod that Create made back from scheduling: the
	// Kubernetes form of "created, not started".
	createdGate = internalPrefix + "created"
	// containerName is the one container of every sandbox pod.
	containerName = "sandbox"
	// secretSuffix makes a pod's Secret name from its own.
	secretSuffix = ".sandboxer-env"
)

// secretName is the name of pod's env Secret.
func secretName(pod string) string { return pod + secretSuffix }

// envNameRE is a name the env-from-Secret path and the exec prelude both
// take: a shell identifier.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validatePodName applies the port's name rule and a pod name's: a
// DNS-1123 subdomain (lower case letters, digits, '-' and '.'), so that an
// upper-case letter or a '_' is refused, never renamed.
func validatePodName(name string) error {
	if err := runtime.ValidateName(name); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%w: container name %q is not a Kubernetes pod name (a DNS-1123 subdomain: lower case letters, digits, '-' and '.'; no '_' or upper case): %s",
			runtime.ErrInvalid, name, strings.Join(errs, "; "))
	}
	return nil
}

// validNetworkName: a network is a label value and part of a ConfigMap
// name, so a DNS-1123 label (at most 63 characters, lower case).
func validNetworkName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("%w: network name %q is not a DNS-1123 label (lower case letters, digits and '-', at most 63 characters): %s",
			runtime.ErrInvalid, name, strings.Join(errs, "; "))
	}
	return nil
}

// isLabel reports whether k=v can be a Kubernetes label.
func isLabel(k, v string) bool {
	return len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0
}

// splitLabels puts each of the caller's labels where the cluster can keep
// it: a pod label when it is a valid one, else the labels annotation. A
// key under internalPrefix is the adapter's own: ErrInvalid.
func splitLabels(in map[string]string) (labels, annotations map[string]string, err error) {
	labels, rest := map[string]string{}, map[string]string{}
	for k, v := range in {
		if strings.HasPrefix(k, internalPrefix) {
			return nil, nil, fmt.Errorf("%w: label %q: the prefix %q is the kubernetes adapter's own", runtime.ErrInvalid, k, internalPrefix)
		}
		if isLabel(k, v) {
			labels[k] = v
		} else {
			rest[k] = v
		}
	}
	annotations = map[string]string{}
	if len(rest) > 0 {
		b, err := json.Marshal(rest)
		if err != nil {
			return nil, nil, err
		}
		annotations[labelsAnnotation] = string(b)
	}
	return labels, annotations, nil
}

// joinLabels is the caller's labels of an object: its labels but the
// adapter's own, and those kept in the annotation. An annotation that
// does not parse (edited by hand) is ignored.
func joinLabels(meta metav1.ObjectMeta) map[string]string {
	out := map[string]string{}
	for k, v := range meta.Labels {
		if !strings.HasPrefix(k, internalPrefix) {
			out[k] = v
		}
	}
	if a := meta.Annotations[labelsAnnotation]; a != "" {
		var rest map[string]string
		if json.Unmarshal([]byte(a), &rest) == nil {
			maps.Copy(out, rest)
		}
	}
	return out
}

// unsupported is an ErrUnsupported error of the adapter's own checks.
func unsupported(format string, args ...any) error {
	return adapterkit.WithKind(runtime.ErrUnsupported, format, args...)
}

// checkSpec refuses what a pod cannot hold (each ErrUnsupported) and what
// the cluster would not take (ErrInvalid), before anything is made.
func checkSpec(spec runtime.RunSpec) error {
	if err := validatePodName(spec.Name); err != nil {
		return adapterkit.WithKind(runtime.ErrInvalid, "%w", err)
	}
	switch {
	case len(spec.Ports) > 0:
		return unsupported("published ports: a pod cannot publish a port on the provisioner's %s; reach the sandbox at its pod address (network mode, Container.Networks)", runtime.DefaultHostIP)
	case spec.PidsLimit != 0:
		return unsupported("a pids limit: a pod spec has no field for it")
	case len(spec.Ulimits) > 0:
		return unsupported("ulimits: a pod spec has no field for them")
	}
	for k := range spec.Env {
		if !envNameRE.MatchString(k) {
			return adapterkit.WithKind(runtime.ErrInvalid, "%w: env name %q is not a shell identifier ([A-Za-z_][A-Za-z0-9_]*), which a pod's env from a Secret needs", runtime.ErrInvalid, k)
		}
	}
	if spec.Network != "" {
		if err := validNetworkName(spec.Network); err != nil {
			return adapterkit.WithKind(runtime.ErrInvalid, "%w", err)
		}
	}
	if spec.CPUs > 0 && math.Round(spec.CPUs*1000) < 1 {
		return unsupported("a CPU limit of %g cores: Kubernetes' smallest is 0.001 (1m)", spec.CPUs)
	}
	for path, opts := range spec.Tmpfs {
		if _, err := tmpfsSize(opts); err != nil {
			return unsupported("tmpfs %s: %v", path, err)
		}
	}
	return nil
}

// tmpfsSize reads a tmpfs's options ("rw,size=16m"): the size in bytes (0
// for none). An emptyDir{medium: Memory} takes a size and nothing else:
// any other option is an error.
func tmpfsSize(opts string) (int64, error) {
	var size int64
	for _, o := range strings.Split(opts, ",") {
		switch v, ok := strings.CutPrefix(o, "size="); {
		case o == "" || o == "rw":
		case ok:
			n, err := runtime.ParseSize(v) // the port's rule: Normalize has checked it
			if err != nil {
				return 0, err
			}
			size = n
		default:
			return 0, fmt.Errorf("option %q: a memory-backed emptyDir takes only size= (and rw)", o)
		}
	}
	return size, nil
}

// buildPod is the pod of spec (checked by checkSpec). created holds it
// back from scheduling (Create). The env is not in it: envFrom names the
// pod's Secret.
// A pod requests all the memory it may use (what a sandbox holds lives in
// memory: a node must have it), but only a share of its CPU limit: CPU is
// compressible, and requesting the whole limit would let a 2-core node
// take no more than two 1-CPU sandboxes, not even one trio.
const (
	// cpuRequestShare: the CPU request is the limit divided by this.
	cpuRequestShare = 10
	// minCPURequestMilli is the smallest CPU request, in millicores.
	minCPURequestMilli = 10
)

func (r *Runtime) buildPod(spec runtime.RunSpec, created bool) (*corev1.Pod, error) {
	labels, annotations, err := splitLabels(spec.Labels)
	if err != nil {
		return nil, err
	}
	if spec.Network != "" && spec.Network != DefaultNetwork {
		labels[networkLabel] = spec.Network
	}
	c := corev1.Container{
		Name:                     containerName,
		Image:                    spec.Image,
		Command:                  spec.Entrypoint,
		Args:                     spec.Command,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurity(spec),
	}
	if len(spec.Env) > 0 {
		c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secretName(spec.Name)}}}}
	}
	if spec.MemoryBytes > 0 || spec.CPUs > 0 {
		res := corev1.ResourceList{}
		if spec.MemoryBytes > 0 {
			res[corev1.ResourceMemory] = *resource.NewQuantity(spec.MemoryBytes, resource.BinarySI)
		}
		if spec.CPUs > 0 {
			res[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Round(spec.CPUs*1000)), resource.DecimalSI)
		}
		req := res.DeepCopy()
		if cpu, ok := res[corev1.ResourceCPU]; ok {
			req[corev1.ResourceCPU] = *resource.NewMilliQuantity(max(cpu.MilliValue()/cpuRequestShare, minCPURequestMilli), resource.DecimalSI)
		}
		c.Resources = corev1.ResourceRequirements{Limits: res, Requests: req}
	}
	var volumes []corev1.Volume
	for i, path := range slices.Sorted(maps.Keys(spec.Tmpfs)) {
		size, _ := tmpfsSize(spec.Tmpfs[path]) // checked by checkSpec
		ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		if size > 0 {
			ed.SizeLimit = resource.NewQuantity(size, resource.BinarySI)
		}
		name := "tmpfs-" + strconv.Itoa(i)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: r.namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			// Kill and Remove are force deletes (grace 0): the pod object
			// goes at once, and the kubelet then stops the containers with
			// the spec's grace, which 0 makes its minimum (about 2 s)
			// rather than the default 30 s. Stop's grace overrides it.
			TerminationGracePeriodSeconds: new(int64(0)),
			AutomountServiceAccountToken:  new(false),
			SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: runtimeDefaultSeccomp()},
			EnableServiceLinks:            new(false),
			Containers:                    []corev1.Container{c},
			Volumes:                       volumes,
		},
	}
	if created {
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: createdGate}}
	} else {
		pod.Spec.NodeName = r.node
	}
	return pod, nil
}

// buildSecret is the env Secret of pod, owned by it.
func (r *Runtime) buildSecret(pod *corev1.Pod, env map[string]string) *corev1.Secret {
	data := make(map[string][]byte, len(env))
	for k, v := range env {
		data[k] = []byte(v)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      secretName(pod.Name),
			Namespace: r.namespace,
			Labels:    map[string]string{managedLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

// containerSecurity is the port's confinement (runtime/confine.go) as a
// container's securityContext, which the Pod Security Standards' baseline
// profile admits: the runtime's default seccomp profile, no privilege
// escalation (the kubelet sets no_new_privs), every capability dropped but
// those of spec (baseline's own list: runtime.PermittedCapabilities).
func containerSecurity(spec runtime.RunSpec) *corev1.SecurityContext {
	add := make([]corev1.Capability, len(spec.Capabilities))
	for i, c := range spec.Capabilities {
		add[i] = corev1.Capability(c)
	}
	return &corev1.SecurityContext{
		Privileged:               new(false),
		AllowPrivilegeEscalation: new(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: add},
		SeccompProfile:           runtimeDefaultSeccomp(),
	}
}

// runtimeDefaultSeccomp is the container runtime's default seccomp
// profile.
func runtimeDefaultSeccomp() *corev1.SeccompProfile {
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
}
