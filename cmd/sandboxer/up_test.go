package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime/kubernetes"
)

// TestCPUsFlagRefusesWhatIsNoNumberOfCores: --cpus NaN, ±Inf or an absurd
// count (which would pass a "> 0" check and become MinInt64 quotas) is
// exit 2 with the rule, before any runtime is contacted (none answers
// here), for every command that provisions.
func TestCPUsFlagRefusesWhatIsNoNumberOfCores(t *testing.T) {
	commands := [][]string{
		{"up", "--owner", "1", "-s", "redis"},
		{"run", "-s", "redis", "--", "true"},
		{"spawn", "--owner", "1", "--services-json", `["redis"]`},
	}
	for _, v := range []string{"NaN", "nan", "+Inf", "Inf", "1e300", "8193"} {
		for _, cmd := range commands {
			t.Run(v+"/"+cmd[0], func(t *testing.T) {
				code, _, stderr := mainInProcess(t, map[string]string{"ROBOCO_SANDBOX_DB_ENABLED": "1"}, append([]string{"--cpus", v}, cmd...)...)
				assert.Equal(t, ExitUsage, code, stderr)
				assert.Contains(t, stderr, "invalid cpus")
				assert.Contains(t, stderr, "must be a positive number of cores, at most 8192")
				assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
			})
		}
	}
}

// TestEnvFileWriterDiscard: Discard removes the file Commit moved into
// place, and never a file the writer did not write (an existing one,
// before Commit), whatever Abort did first.
func TestEnvFileWriterDiscard(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sandbox.env")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))

	w, err := newEnvFile(path)
	require.NoError(t, err)
	w.Abort()
	w.Discard()
	data, err := os.ReadFile(path)
	require.NoError(t, err, "not committed: the existing file stays")
	assert.Equal(t, "old", string(data))

	w, err = newEnvFile(path)
	require.NoError(t, err)
	require.NoError(t, w.Commit([]byte("K=v\n")))
	w.Abort()
	w.Discard()
	assertNoFiles(t, dir)
}

// TestTeardownAfterSuccessRemovesOnlyThisCall: an earlier `up --owner ID`
// made a sandbox for a live agent; a later call for the same owner that
// tears down after it succeeded (up whose output is unwritable, spawn
// whose report is, run once CMD is done) removes its own sandbox and not
// that one, on every runtime: the runtime's own CLI still lists it under
// the owner, and a real client still logs in with the password handed out
// first (a sandbox made anew would have another).
func TestTeardownAfterSuccessRemovesOnlyThisCall(t *testing.T) {
	for _, name := range testruntimes.Names {
		t.Run(name, func(t *testing.T) {
			c := newCLIOn(t, name, "postgres", "redis")
			id := "t" + testkit.RandomHex(3)
			owner := provision.Options{LabelPrefix: c.prefix}.OwnerName(id)
			ownerKey := labels.For(c.prefix).Owner
			env := parseDotenv(t, c.mustSbx("up", "--owner", id, "-s", "postgres").stdout)
			url := env[engines.Default.URLName("postgres", "ROBOCO_TEST")]
			require.NotEmpty(t, url)
			kept := c.prefix + "-sandbox-pg-" + id
			require.Equal(t, []string{kept}, c.own.LabelledNames(t, ownerKey, owner))

			later := []struct {
				name string
				run  func(t *testing.T)
			}{
				{"UpWithUnwritableOutput", func(t *testing.T) {
					code, stderr := c.withStdout(t, "/dev/full", nil, "up", "--owner", id, "-s", "redis")
					assert.Equal(t, ExitFailure, code, stderr)
					assert.Contains(t, stderr, "sandboxes torn down")
				}},
				{"SpawnWithUnwritableReport", func(t *testing.T) {
					code, stderr := c.withStdout(t, "/dev/full", []string{"ROBOCO_SANDBOX_DB_ENABLED=1"}, "spawn", "--owner", id, "--services-json", `["redis"]`)
					assert.Equal(t, ExitFailure, code, stderr)
					assert.Contains(t, stderr, "sandboxes torn down")
				}},
				{"RunOnceCMDIsDone", func(t *testing.T) {
					r := c.mustSbx("run", "--owner", id, "-s", "redis", "--", "sh", "-c", `test -n "$ROBOCO_TEST_REDIS_URL"`)
					assert.Empty(t, r.stdout)
				}},
			}
			for _, l := range later {
				t.Run(l.name, func(t *testing.T) {
					l.run(t)
					assert.Equal(t, []string{kept}, c.own.LabelledNames(t, ownerKey, owner), "the call's own sandbox is gone, the earlier one is there")
					_, err := engines.Default.Login(testkit.Context(t, time.Minute), "postgres", url)
					assert.NoError(t, err, "the earlier sandbox still serves with its own password")
				})
			}
		})
	}
}

// TestUpAndSpawnReportAdoptedBy: on the Kubernetes row, where the runtime
// removes a sandbox with its owner, `up -o json` and spawn's report say
// adopted_by when the agent pod already existed (made here with kubectl,
// as an orchestrator would), and kubectl shows that pod as each sandbox
// pod's owner; without an agent pod there is no adopted_by, and no owner
// reference.
func TestUpAndSpawnReportAdoptedBy(t *testing.T) {
	c := newCLIOn(t, kubernetes.Name, "redis")
	kubeconfig := testenv.Kubeconfig(t)
	ns := testenv.Getenv(testenv.EnvK8sNamespace)
	if ns == "" {
		ns = "default"
	}
	kubectl := func(t *testing.T, stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		require.NoError(t, cmd.Run(), "kubectl %s: %s", strings.Join(args, " "), errb.String())
		return strings.TrimSpace(out.String())
	}
	// The test cluster runs no scheduler: the sandboxes are bound to its
	// one node; the agent pod need only exist.
	c.env = append(c.env, kubernetes.EnvNode+"="+kubectl(t, "", "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"))
	opts := provision.Options{LabelPrefix: c.prefix}
	agentPod := func(t *testing.T, id string) string {
		name := opts.OwnerName(id)
		kubectl(t, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec: {containers: [{name: main, image: %s, command: [sleep, \"3600\"]}]}\n", name, testenv.Image(t, kubernetes.Name, "redis")), "create", "-f", "-")
		t.Cleanup(func() { kubectl(t, "", "delete", "pod", name, "--ignore-not-found", "--wait=false") })
		return name
	}
	ownerRefs := func(t *testing.T, pod string) string {
		return kubectl(t, "", "get", "pod", pod, "-o", `jsonpath={range .metadata.ownerReferences[*]}{.kind}/{.name}{" "}{end}`)
	}

	t.Run("Up", func(t *testing.T) {
		id := "ad" + testkit.RandomHex(3)
		agent := agentPod(t, id)
		r := c.mustSbx("up", "--owner", id, "-s", "redis", "--network", "pod", "-o", "json")
		var out struct {
			AdoptedBy  string `json:"adopted_by"`
			Containers []struct {
				Name string `json:"name"`
			} `json:"containers"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
		assert.Equal(t, agent, out.AdoptedBy)
		require.Len(t, out.Containers, 1)
		assert.Equal(t, "Pod/"+agent, ownerRefs(t, out.Containers[0].Name), "kubectl shows the agent pod as the sandbox's owner")
	})
	t.Run("Spawn", func(t *testing.T) {
		id := "ad" + testkit.RandomHex(3)
		agent := agentPod(t, id)
		r := c.runWith([]string{"ROBOCO_SANDBOX_DB_ENABLED=1"}, c.args("spawn", "--owner", id, "--services-json", `["redis"]`, "--network", "pod")...)
		require.Equal(t, 0, r.code, r.stderr)
		var rep struct {
			Status     string `json:"status"`
			AdoptedBy  string `json:"adopted_by"`
			Containers []struct {
				Name string `json:"name"`
			} `json:"containers"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
		assert.Equal(t, "provisioned", rep.Status)
		assert.Equal(t, agent, rep.AdoptedBy)
		require.Len(t, rep.Containers, 1)
		assert.Equal(t, "Pod/"+agent, ownerRefs(t, rep.Containers[0].Name))
	})
	t.Run("NoAgentPodYet", func(t *testing.T) {
		id := "ad" + testkit.RandomHex(3)
		r := c.mustSbx("up", "--owner", id, "-s", "redis", "--network", "pod", "-o", "json")
		assert.NotContains(t, r.stdout, `"adopted_by"`)
		var out upJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
		require.Len(t, out.Containers, 1)
		assert.Empty(t, ownerRefs(t, out.Containers[0].Name))
	})
}
