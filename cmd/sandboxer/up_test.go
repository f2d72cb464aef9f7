package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
