// Package kubernetes is sandboxer's Kubernetes adapter: it implements
// runtime.ContainerRuntime (with runtime.Diagnoser and
// runtime.FormReporter) on client-go, one sandbox being one Pod in one
// namespace.
//
// Configuration: the kubeconfig of WithKubeconfig, else KUBECONFIG, else
// ~/.kube/config, else the in-cluster config of a pod's service account;
// the namespace of WithNamespace, else SANDBOXER_K8S_NAMESPACE, else the
// kubeconfig context's (in a pod: its service account's), else "default".
// WithNode (SANDBOXER_K8S_NODE) binds every pod to one node (spec.nodeName)
// for a cluster without a scheduler, or to keep sandboxes next to their
// agent. Every API request but an exec's stream is bounded by the request
// timeout (rest.Config.Timeout, 30 s), and every one by the caller's
// context; every wait polls with a deadline.
//
// The mapping:
//   - Run: a Pod named spec.Name (restartPolicy Never, no service account
//     token, no service links, one container "sandbox"), whose env is a
//     per-sandbox Secret (envFrom), never the pod spec; the Secret is owned
//     by the pod (an ownerReference set as soon as the pod exists), so the
//     cluster's garbage collector removes it with the pod, and Remove
//     removes it too. Run returns once the container runs (or already
//     ended); a pod that cannot start is deleted and its reason returned
//     (an image pull failure is runtime.ErrImageNotFound).
//   - Names: the port's rule (runtime.ValidateName) and a pod name's
//     (a DNS-1123 subdomain: lower case, no '_'); a name the cluster would
//     not take is runtime.ErrInvalid, never renamed.
//   - Labels: each pair that is a valid Kubernetes label is a pod label;
//     the others (a value with spaces, ':' or '/', too long, ...) are kept
//     in the annotation "sandboxer.internal/labels" as JSON. Inspect and
//     List report the union, exactly as set; List selects on the pod labels
//     server side and filters the rest client side.
//   - Tmpfs: an emptyDir{medium: Memory} per path, sized by "size=".
//   - MemoryBytes, CPUs: limits. The memory request is the whole limit
//     (a sandbox's data lives in memory: the node must have it), the CPU
//     request a tenth of the limit (at least 10m): CPU is compressible,
//     and a whole-limit request would fit no trio on a 2-core node. A pod
//     the kubelet refuses (OutOfcpu, OutOfmemory) fails Run with that
//     reason.
//   - Container.ID is the pod's UID (chosen by the API server, never
//     reused: a newer pod under a name has another); names and UIDs are
//     both accepted by every verb, a UID first, then a name (one get). A
//     UID the adapter made, listed or read costs one get by the pod's
//     remembered name (a name never changes and a UID is never reused, so
//     the memo cannot go stale); one it never saw costs one list of the
//     namespace, since the API has no look-up by UID. A pod is deleted
//     with its UID as the delete's precondition, so a verb given a UID
//     acts on that pod or none.
//   - State: Pending is created, Running is running (exited once its
//     container terminated), Succeeded and Failed are exited with the
//     container's exit code, and OOMKilled from its terminated reason.
//   - Networks: a cluster's pod network is flat. CreateNetwork records a
//     network as a labelled ConfigMap ("sandboxer-network.<name>"), so that
//     names are unique, and isolates it with a NetworkPolicy of the same
//     name owned by the ConfigMap (ingress only from the network's pods;
//     an internal one's egress only to them); a pod joins it by a label,
//     and Container.Networks maps it (and DefaultNetwork, for every pod)
//     to the pod IP. A policy isolates only where the cluster's network
//     plugin enforces NetworkPolicy: Diagnose probes that (its image:
//     WithProbeImage, SANDBOXER_K8S_PROBE_IMAGE).
//   - Stop and Kill cannot keep a pod: Stop deletes a running pod with
//     gracePeriodSeconds = grace (SIGTERM, then SIGKILL after grace) and
//     waits until it is gone; Kill deletes it with grace 0 and waits; of
//     a pod that has ended (or was only created) both do nothing. Remove
//     deletes with grace 0, and the Secret, and waits; absent is nil.
//
// Unsupported, as runtime.ErrUnsupported (runtime.Forms says which):
// published ports (a pod cannot be published on the provisioner's
// 127.0.0.1: use network mode and the pod address), PidsLimit and Ulimits
// (no pod field), tmpfs options other than size and rw, and ExecSpec.User.
// It has no image store (it does not implement runtime.ImageStore): the
// kubelet pulls at Run, and the API has no store to ask, fill or empty
// (the provisioner then lets Run pull, and warm start is off).
package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Name is the runtime name this adapter reports and puts in its errors.
const Name = "kubernetes"

// Environment variables New reads.
const (
	// EnvNamespace names the namespace of the sandboxes' pods.
	EnvNamespace = "SANDBOXER_K8S_NAMESPACE"
	// EnvNode binds every pod to this node (spec.nodeName).
	EnvNode = "SANDBOXER_K8S_NODE"
)

const (
	// DefaultNetwork is the name under which Container.Networks reports
	// every pod's address on the cluster's pod network. It is a network
	// that always exists: RunSpec.Network (and `up --network pod`) may
	// name it without a CreateNetwork; CreateNetwork of it is
	// ErrAlreadyExists and RemoveNetwork of it does nothing.
	DefaultNetwork = "pod"
	// requestTimeout bounds one API request (rest.Config.Timeout).
	requestTimeout = 30 * time.Second
	// startTimeout bounds how long Run waits for the container to run
	// (the kubelet pulls the image meanwhile).
	startTimeout = 5 * time.Minute
	// goneTimeout bounds the wait for a deleted pod to be gone, beyond
	// its grace.
	goneTimeout = time.Minute
	// clientQPS and clientBurst bound the client's request rate.
	clientQPS, clientBurst = 50, 100
	// firstPoll is the first pause of a wait on a pod, growing by half
	// on each look up to pollInterval: a pod runs, or is gone, within a
	// few hundred milliseconds, and a fixed 200 ms step would add about
	// 100 ms to every Run and Remove on average.
	firstPoll = 20 * time.Millisecond
	// pollInterval is the longest pause between two looks at a pod.
	pollInterval = 200 * time.Millisecond
)

// Compile-time proof that the adapter implements the port and its optional
// interfaces.
var (
	_ runtime.ContainerRuntime = (*Runtime)(nil)
	_ runtime.Diagnoser        = (*Runtime)(nil)
	_ runtime.FormReporter     = (*Runtime)(nil)
)

// Runtime is a runtime.ContainerRuntime backed by a Kubernetes cluster. It
// is safe for concurrent use.
type Runtime struct {
	cs        kubernetes.Interface
	config    *rest.Config
	namespace string
	node      string
	log       *slog.Logger
	// startTimeout bounds Run's wait for the container (startTimeout).
	startTimeout time.Duration
	// probeImage is the image of Diagnose's NetworkPolicy probe.
	probeImage string
	// pingTimeout bounds Version (WithPingTimeout; 0: the request
	// timeout alone).
	pingTimeout time.Duration
	// names remembers pods' names by UID (see uidNames).
	names uidNames
}

type options struct {
	kubeconfig   string
	namespace    string
	node         string
	log          *slog.Logger
	startTimeout time.Duration
	probeImage   string
	pingTimeout  time.Duration
}

// Option configures New.
type Option func(*options)

// WithKubeconfig reads the cluster's address and credentials from path
// instead of KUBECONFIG.
func WithKubeconfig(path string) Option { return func(o *options) { o.kubeconfig = path } }

// WithNamespace puts the pods in namespace instead of SANDBOXER_K8S_NAMESPACE
// or the kubeconfig context's.
func WithNamespace(namespace string) Option { return func(o *options) { o.namespace = namespace } }

// WithNode binds every pod to node (spec.nodeName, bypassing the
// scheduler) instead of SANDBOXER_K8S_NODE.
func WithNode(node string) Option { return func(o *options) { o.node = node } }

// WithLogger sets the logger for best-effort clean-ups (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithPingTimeout bounds Version, the first contact with the API server
// (default: the request timeout, 30 s).
func WithPingTimeout(d time.Duration) Option { return func(o *options) { o.pingTimeout = d } }

// WithStartTimeout bounds how long Run waits for a pod's container to run,
// the image pull included (default 5 minutes).
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.startTimeout = d } }

// New returns a Runtime for the configured cluster and namespace. It does
// not contact the API server: a cluster that does not answer is reported
// by Version and every verb as runtime.ErrUnavailable. New fails for a
// kubeconfig it cannot load (runtime.ErrUnavailable, naming it).
func New(opts ...Option) (*Runtime, error) {
	o := options{log: slog.Default(), startTimeout: startTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	where := o.kubeconfig
	if where == "" {
		where = os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	}
	if where == "" {
		where = "kubeconfig"
	}
	config, err := cc.ClientConfig()
	if err != nil {
		return nil, adapterkit.ConnectError(Name, where, fmt.Errorf("no usable kubeconfig or in-cluster config: %w", err))
	}
	config = rest.CopyConfig(config)
	config.Timeout = requestTimeout
	// client-go's default (5 requests/s) throttles a provision of a few
	// sandboxes, each of which polls its pod; the API server's priority
	// and fairness is the limit that counts.
	config.QPS, config.Burst = clientQPS, clientBurst
	ns := o.namespace
	if ns == "" {
		ns = os.Getenv(EnvNamespace)
	}
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	node := o.node
	if node == "" {
		node = os.Getenv(EnvNode)
	}
	cs, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, adapterkit.ConnectError(Name, config.Host, err)
	}
	return &Runtime{cs: cs, config: config, namespace: ns, node: node, log: o.log, startTimeout: o.startTimeout, probeImage: probeImageOf(o.probeImage), pingTimeout: o.pingTimeout}, nil
}

// Name returns "kubernetes".
func (r *Runtime) Name() string { return Name }

// Endpoint returns the API server's URL.
func (r *Runtime) Endpoint() string { return runtime.ShowEndpoint(r.config.Host) }

// Namespace is the namespace the pods, Secrets and network ConfigMaps are
// in.
func (r *Runtime) Namespace() string { return r.namespace }

// Forms reports the guarantees this adapter gives in their Kubernetes form
// (see the package documentation).
func (r *Runtime) Forms() runtime.Forms {
	return runtime.Forms{
		NoHostPorts:     true,
		NoProcessLimits: true,
		NoExecUser:      true,
		TmpfsSizeOnly:   true,
		StopRemoves:     true,
		// A network is a record and a policy over the flat pod network.
		NoNetworkSubnets: true,
	}
}

// Version asks the API server for its version (gitVersion, e.g.
// "v1.37.2"). OOM kills are reported: the kubelet records a container's
// terminated reason OOMKilled.
func (r *Runtime) Version(ctx context.Context) (runtime.Info, error) {
	if r.pingTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.pingTimeout)
		defer cancel()
	}
	body, err := r.cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return runtime.Info{}, r.wrap(runtime.OpVersion, r.config.Host, err)
	}
	var v version.Info
	if err := json.Unmarshal(body, &v); err != nil {
		return runtime.Info{}, r.wrap(runtime.OpVersion, r.config.Host, fmt.Errorf("not a Kubernetes API server: /version: %w", err))
	}
	return runtime.Info{
		Runtime:        Name,
		Endpoint:       r.Endpoint(),
		Version:        v.GitVersion,
		APIVersion:     "v1",
		ReportsOOMKill: true,
	}, nil
}

// Close releases nothing: client-go's transports are shared and idle
// connections time out.
func (r *Runtime) Close() error { return nil }

// nextPoll is the pause after one of d: half as long again, at most
// pollInterval.
func nextPoll(d time.Duration) time.Duration { return min(d+d/2, pollInterval) }
