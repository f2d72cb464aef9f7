package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/roboco/sandboxer/runtime"
)

// EnvProbeImage names the image of Diagnose's NetworkPolicy probe (a
// busybox with httpd, nc and sh) for a cluster that cannot pull
// defaultProbeImage.
const EnvProbeImage = "SANDBOXER_K8S_PROBE_IMAGE"

const (
	// defaultProbeImage is the probe's image when neither
	// WithProbeImage nor SANDBOXER_K8S_PROBE_IMAGE names one.
	defaultProbeImage = "busybox:1.37"
	// probeTimeout bounds the whole probe, its pods' starts (and pulls)
	// included.
	probeTimeout = 2 * time.Minute
	// probeReach bounds how long the probe's client tries to reach its
	// server before any policy (the control).
	probeReach = 20 * time.Second
	// probeEnforce is how long an enforcer has to make a deny-all policy
	// hold; one that has not by then does not enforce NetworkPolicy.
	probeEnforce = 20 * time.Second
	// probePort is the probe server's port.
	probePort = "8080"
	// probeLabel carries a probe's ID, probeRoleLabel its pod's role.
	probeLabel, probeRoleLabel = "sandboxer-probe", "sandboxer-probe-role"
	// checkNetworkPolicy is the Diagnostic.Check of the probe.
	checkNetworkPolicy = "networkpolicy"
)

// WithProbeImage sets the image of Diagnose's NetworkPolicy probe instead
// of SANDBOXER_K8S_PROBE_IMAGE (default busybox:1.37): a busybox with
// httpd, nc and sh.
func WithProbeImage(ref string) Option { return func(o *options) { o.probeImage = ref } }

// probePolicy is whether the cluster enforces NetworkPolicy, tried from a
// neighbour's side, since no API says so (which plugin enforces policy is
// the cluster's business, and a namespace's Role sees none of it): two
// pods of the probe image, a server (busybox httpd) and a client; the
// client must reach the server first (else the probe cannot tell), then a
// deny-all ingress policy selects the server, and the client's TCP
// connect must fail within probeEnforce, twice in a row. A cluster where
// it still connects gets a Diagnostic. Everything the probe makes is
// labelled with its ID and removed before it returns, even when its
// context ends; the whole probe is bounded by probeTimeout.
func (r *Runtime) probePolicy(ctx context.Context) *runtime.Diagnostic {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cannot := func(format string, args ...any) *runtime.Diagnostic {
		return &runtime.Diagnostic{Check: checkNetworkPolicy, Problem: "cannot tell whether the cluster enforces NetworkPolicy (without it nothing isolates sandboxer's networks): " + fmt.Sprintf(format, args...)}
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	name := "sandboxer-probe-" + id
	spec := func(role string, entrypoint ...string) runtime.RunSpec {
		return runtime.RunSpec{
			Name: name + "-" + role, Image: r.probeImage, Entrypoint: entrypoint,
			Labels:      map[string]string{probeLabel: id, probeRoleLabel: role},
			MemoryBytes: 32 << 20, CPUs: 0.1,
		}
	}
	defer r.removeProbe(ctx, name)
	server, err := r.Run(ctx, spec("server", "httpd", "-f", "-p", probePort, "-h", "/"))
	if err != nil {
		return cannot("probe pod: %v (set %s to a busybox image the cluster can pull)", err, EnvProbeImage)
	}
	client, err := r.Run(ctx, spec("client", "sleep", "3600"))
	if err != nil {
		return cannot("probe pod: %v (set %s to a busybox image the cluster can pull)", err, EnvProbeImage)
	}
	ip := server.Networks[DefaultNetwork]
	// connects is whether the client opened a TCP connection to the
	// server (nc exits 0 once the server has answered and closed).
	connects := func() (bool, error) {
		res, err := r.Exec(ctx, client.ID, runtime.ExecSpec{Cmd: []string{"sh", "-c", "echo | nc -w 2 " + ip + " " + probePort + " >/dev/null"}})
		return err == nil && res.ExitCode == 0, err
	}
	if ok, err := pollUntil(ctx, probeReach, func() (bool, error) { return connects() }); !ok {
		return cannot("probe pod %s does not reach %s:%s even without a policy (%v)", client.Name, ip, probePort, err)
	}
	_, err = r.cs.NetworkingV1().NetworkPolicies(r.namespace).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.namespace, Labels: map[string]string{managedLabel: "true", probeLabel: id}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{probeLabel: id, probeRoleLabel: "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return cannot("probe network policy: %v", r.wrap("create network policy", name, err))
	}
	refused := 0
	held, err := pollUntil(ctx, probeEnforce, func() (bool, error) {
		ok, err := connects()
		if err != nil {
			return false, err
		}
		if ok {
			refused = 0
		} else {
			refused++
		}
		return refused >= 2, nil
	})
	switch {
	case held:
		return nil
	case ctx.Err() != nil:
		return cannot("the probe ran out of time: %v", err)
	}
	return &runtime.Diagnostic{Check: checkNetworkPolicy, Problem: fmt.Sprintf(
		"the cluster does not enforce NetworkPolicy: a probe pod still connected to another through a deny-all policy after %s, so sandboxer's networks isolate nothing here (anything in the cluster reaches every sandbox pod): run a network plugin that enforces NetworkPolicy (kube-router's policy controller, Calico, Cilium)", probeEnforce)}
}

// removeProbe removes the probe's pods and policy, even when ctx is done.
func (r *Runtime) removeProbe(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), goneTimeout)
	defer cancel()
	for _, role := range []string{"client", "server"} {
		if err := r.Remove(ctx, name+"-"+role); err != nil {
			r.log.Warn("kubernetes: doctor's probe: cannot remove its pod", "pod", name+"-"+role, "err", err)
		}
	}
	err := r.cs.NetworkingV1().NetworkPolicies(r.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.log.Warn("kubernetes: doctor's probe: cannot remove its network policy", "policy", name, "err", err)
	}
}

// pollUntil calls cond until it reports true, for at most d (and ctx);
// it returns the last error of cond when it never did.
func pollUntil(ctx context.Context, d time.Duration, cond func() (bool, error)) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last error
	for pause := firstPoll; ; pause = nextPoll(pause) {
		ok, err := cond()
		if ok {
			return true, nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return false, last
		case <-time.After(pause):
		}
	}
}

// probeImageOf is the probe image of o, else of the environment, else the
// default.
func probeImageOf(ref string) string {
	for _, s := range []string{ref, strings.TrimSpace(os.Getenv(EnvProbeImage))} {
		if s != "" {
			return s
		}
	}
	return defaultProbeImage
}
