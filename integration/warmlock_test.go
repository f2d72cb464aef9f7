package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
)

// The child mode of TestWarmTemplateBuiltOnceAcrossProcesses: the test
// binary run again, as a second process, with these set.
const (
	warmChildRuntime = "SANDBOXER_TEST_WARM_CHILD_RUNTIME"
	warmChildArg     = "SANDBOXER_TEST_WARM_CHILD_ARG"
	warmChildOut     = "SANDBOXER_TEST_WARM_CHILD_OUT"
)

// warmChildResult is what a child reports of its warm provision.
type warmChildResult struct {
	// Built: this process built the template (EventTemplateBuilt).
	Built bool
	// Template is the template the sandbox started from ("": cold).
	Template string
	// Err is the provision's error.
	Err string
}

// TestWarmTemplateBuiltOnceAcrossProcesses: two processes that provision
// warm postgres at the same time, on one runtime, with a template neither
// finds (a recipe of this test's own: one more server argument), build it
// once: one reports the build, and both start from the same template (the
// README's "across processes, under a file lock").
func TestWarmTemplateBuiltOnceAcrossProcesses(t *testing.T) {
	if name := os.Getenv(warmChildRuntime); name != "" {
		warmChild(t, name)
		return
	}
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		testkit.EnsureImage(t, b.RT, e.Images["postgres"])
		arg := "application_name=" + e.Prefix
		p := e.Provisioner(func(o *provision.Options) { o.Args = warmChildArgs(arg) })
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := p.RemoveTemplate(cctx, "postgres"); err != nil {
				t.Errorf("cleanup: remove this test's template: %v", err)
			}
		})
		before, err := p.LookupTemplate(ctx, "postgres")
		require.NoError(t, err)
		require.False(t, before.Present, "the template of this test's recipe is new")

		dir := t.TempDir()
		results := make([]warmChildResult, 2)
		var wg sync.WaitGroup
		for i := range results {
			out := filepath.Join(dir, "child"+string(rune('a'+i))+".json")
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestWarmTemplateBuiltOnceAcrossProcesses$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), warmChildRuntime+"="+b.Name, warmChildArg+"="+arg, warmChildOut+"="+out)
			wg.Add(1)
			go func() {
				defer wg.Done()
				log, err := cmd.CombinedOutput()
				if !assert.NoError(t, err, "child %d: %s", i, log) {
					return
				}
				body, err := os.ReadFile(out)
				if assert.NoError(t, err, "child %d: %s", i, log) {
					assert.NoError(t, json.Unmarshal(body, &results[i]))
				}
			}()
		}
		wg.Wait()
		built := 0
		for i, r := range results {
			require.Empty(t, r.Err, "child %d", i)
			if r.Built {
				built++
			}
		}
		assert.Equal(t, 1, built, "one of the two processes built the template: %+v", results)
		after, err := p.LookupTemplate(ctx, "postgres")
		require.NoError(t, err)
		require.True(t, after.Present, "the template is in %s's image store", b.Name)
		for i, r := range results {
			assert.Equal(t, after.Ref, r.Template, "child %d started warm from it", i)
		}
	})
}

func warmChildArgs(arg string) map[string][]string {
	return map[string][]string{"postgres": {"-c", arg}}
}

// warmChild is one process of TestWarmTemplateBuiltOnceAcrossProcesses:
// it provisions warm postgres on runtime name and writes what it saw.
func warmChild(t *testing.T, name string) {
	b := testruntimes.Connect(t, name)
	e := newEnv(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var (
		mu  sync.Mutex
		res warmChildResult
	)
	p := e.Provisioner(func(o *provision.Options) {
		o.Args = warmChildArgs(os.Getenv(warmChildArg))
		o.Warm = provision.WarmAuto
		o.OnEvent = func(ev provision.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Kind {
			case provision.EventTemplateBuilt:
				res.Built = true
			case provision.EventReady:
				res.Template = ev.Template
			}
		}
	})
	if _, err := p.Provision(ctx, e.Owner("lock"), []string{"postgres"}); err != nil {
		res.Err = err.Error()
	}
	mu.Lock()
	body, err := json.Marshal(res)
	mu.Unlock()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(os.Getenv(warmChildOut), body, 0o600))
}
