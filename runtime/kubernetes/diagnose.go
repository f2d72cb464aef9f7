package kubernetes

import (
	"context"
	"fmt"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/roboco/sandboxer/runtime"
)

// access is one permission the adapter uses in its namespace.
type access struct {
	verb, res, subresource string
	// group is the resource's API group ("" : the core group).
	group string
}

// resource is the access's resource, with its subresource after a '/'.
func (a access) resource() string {
	if a.subresource != "" {
		return a.res + "/" + a.subresource
	}
	return a.res
}

// accesses are every verb the adapter's calls need, and no other: the
// Role of the README grants exactly these (a test holds one against the
// other, and runs the adapter on a service account bound to that Role).
var accesses = []access{
	// Run and Create; Inspect and every wait; List and Snapshot (and a
	// UID the adapter never saw); Remove, Stop, Kill.
	{"create", "pods", "", ""}, {"get", "pods", "", ""}, {"list", "pods", "", ""}, {"delete", "pods", "", ""},
	{"update", "pods", "", ""}, // Adopt: the ownerReference to the agent pod
	// Exec: the API server authorizes the WebSocket exec (a GET upgrade)
	// as create; where one does not, its refusal is a failed upgrade, and
	// the SPDY fallback (a POST) is a create.
	{"create", "pods", "exec", ""},
	// The env Secret: made, read (a stale one of the name), deleted; a
	// stale one is replaced by delete and create, never updated.
	{"create", "secrets", "", ""}, {"get", "secrets", "", ""}, {"delete", "secrets", "", ""},
	// Networks: CreateNetwork, Run's check, ListNetworks and
	// RemoveNetwork (whose check for pods still on it is a list of pods).
	{"create", "configmaps", "", ""}, {"get", "configmaps", "", ""}, {"list", "configmaps", "", ""}, {"delete", "configmaps", "", ""},
	// A network's NetworkPolicy: made with it, read (a stale one of the
	// name, and RemoveNetwork's check that it is the adapter's), deleted;
	// Diagnose's enforcement probe makes and deletes one too.
	{"create", "networkpolicies", "", networkingGroup}, {"get", "networkpolicies", "", networkingGroup}, {"delete", "networkpolicies", "", networkingGroup},
}

// networkingGroup is the API group of NetworkPolicy.
const networkingGroup = "networking.k8s.io"

// Diagnose asks the API server (SelfSubjectAccessReview) whether this
// client may do, in the namespace, each thing the adapter does; a missing
// permission is a Diagnostic (Check "rbac") naming the verb and the
// resource. With every permission, it then probes whether the cluster
// enforces NetworkPolicy (Check "networkpolicy", see probePolicy): the
// one thing it changes, two probe pods and a policy that it removes
// before it returns. The cluster's version and the namespace are in
// Version and Namespace.
func (r *Runtime) Diagnose(ctx context.Context) []runtime.Diagnostic {
	var out []runtime.Diagnostic
	for _, a := range accesses {
		res := a.resource()
		review, err := r.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Namespace: r.namespace, Verb: a.verb, Group: a.group, Resource: a.res, Subresource: a.subresource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			out = append(out, runtime.Diagnostic{Check: "rbac", Problem: fmt.Sprintf("cannot ask the API server whether %s %s is allowed in namespace %s: %v", a.verb, res, r.namespace, r.wrap("access review", res, err))})
			return out
		}
		if !review.Status.Allowed {
			out = append(out, runtime.Diagnostic{Check: "rbac", Problem: fmt.Sprintf("not allowed to %s %s in namespace %s (grant the Role in the README's Kubernetes section)", a.verb, res, r.namespace)})
		}
	}
	if len(out) == 0 {
		if d := r.probePolicy(ctx); d != nil {
			out = append(out, *d)
		}
	}
	return out
}
