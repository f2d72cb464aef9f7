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
	verb, resource, subresource string
}

// accesses are every verb the adapter's calls need: the Role of the
// README grants exactly these.
var accesses = []access{
	{"create", "pods", ""}, {"get", "pods", ""}, {"list", "pods", ""}, {"delete", "pods", ""},
	{"update", "pods", ""}, // Adopt: the ownerReference to the agent pod
	{"create", "pods", "exec"}, {"get", "pods", "exec"},
	{"create", "secrets", ""}, {"get", "secrets", ""}, {"update", "secrets", ""}, {"delete", "secrets", ""},
	{"create", "configmaps", ""}, {"get", "configmaps", ""}, {"delete", "configmaps", ""},
}

// Diagnose asks the API server (SelfSubjectAccessReview) whether this
// client may do, in the namespace, each thing the adapter does; a missing
// permission is a Diagnostic naming the verb and the resource. It changes
// nothing. The cluster's version and the namespace are in Version and
// Namespace.
func (r *Runtime) Diagnose(ctx context.Context) []runtime.Diagnostic {
	var out []runtime.Diagnostic
	for _, a := range accesses {
		res := a.resource
		if a.subresource != "" {
			res += "/" + a.subresource
		}
		review, err := r.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Namespace: r.namespace, Verb: a.verb, Resource: a.resource, Subresource: a.subresource,
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
	return out
}
