package kubernetes

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/roboco/sandboxer/runtime"
)

// TestUIDMemoNeverNamesAnotherPod: a UID whose remembered name now holds a
// newer pod (another UID) is not found, and costs a get, not a list; a
// UID the adapter never saw is found by one list. The API server side is
// client-go's fake clientset: what is tested is the adapter's reading of
// its answers (the real cluster's side: TestInspectAndExecByUIDListNothing).
func TestUIDMemoNeverNamesAnotherPod(t *testing.T) {
	const oldUID, newUID, otherUID = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222", "33333333-3333-3333-3333-333333333333"
	pod := func(name, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)}}
	}
	cs := fake.NewClientset(pod("p", newUID), pod("q", otherUID))
	lists := 0
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		lists++
		return false, nil, nil
	})
	r := &Runtime{cs: cs, config: &rest.Config{Host: "fake"}, namespace: "ns"}
	r.names.remember(pod("p", oldUID))
	ctx := context.Background()

	_, err := r.Inspect(ctx, oldUID)
	require.ErrorIs(t, err, runtime.ErrNotFound, "p's old UID names no pod once a newer p exists")
	assert.Zero(t, lists, "a remembered UID costs a get")

	c, err := r.Inspect(ctx, otherUID)
	require.NoError(t, err)
	assert.Equal(t, "q", c.Name)
	assert.Equal(t, 1, lists, "an unseen UID costs one list")

	_, err = r.Inspect(ctx, newUID)
	require.NoError(t, err)
	assert.Equal(t, 1, lists, "the list remembered every pod it saw")
}
