package kubernetes_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/kubernetes"
)

// TestEveryRequestTimesOutAfter30s: against an API server that accepts the
// connection and never answers, a verb called with no deadline of its own
// fails after the adapter's per-request timeout (30 s), not later and not
// never: the caller's longer deadline is not what ends it, and the error
// names the runtime and the verb. Version (the discovery client) and
// Inspect (the typed client) are both bounded.
func TestEveryRequestTimesOutAfter30s(t *testing.T) {
	server := "http://" + strings.TrimPrefix(testkit.Hung(t, "tcp"), "tcp://")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hung"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["hung"] = &clientcmdapi.AuthInfo{Token: "x"}
	cfg.Contexts["hung"] = &clientcmdapi.Context{Cluster: "hung", AuthInfo: "hung", Namespace: "sandboxer"}
	cfg.CurrentContext = "hung"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	rt, err := kubernetes.New(kubernetes.WithKubeconfig(path))
	require.NoError(t, err)

	for name, call := range map[string]func(context.Context) error{
		"Version": func(ctx context.Context) error { _, err := rt.Version(ctx); return err },
		"Inspect": func(ctx context.Context) error { _, err := rt.Inspect(ctx, "sbx-hung"); return err },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// The caller's deadline is far beyond the request timeout: it
			// only keeps a regression from hanging the test.
			ctx := testkit.Context(t, 70*time.Second)
			start := time.Now()
			err := call(ctx)
			took := time.Since(start)
			t.Logf("%s against a silent API server failed after %s: %v", name, took.Round(time.Millisecond), err)
			require.Error(t, err)
			var re *runtime.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, kubernetes.Name, re.Runtime)
			assert.NoError(t, ctx.Err(), "the caller's deadline has not passed")
			assert.GreaterOrEqual(t, took, 29*time.Second, "not before the request timeout")
			assert.Less(t, took, 45*time.Second, "the request timeout ended it, not the caller's deadline")
		})
	}
}
