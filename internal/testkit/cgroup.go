package testkit

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// CgroupLimits are a container's cgroup limits as the kernel holds them;
// -1 means none.
type CgroupLimits struct {
	Version string // "v1" or "v2"
	Memory  int64
	CPUs    float64
	Pids    int64
}

// ReadCgroupLimits reads a container's limits from its cgroup files under
// /sys/fs/cgroup, cgroup v1 or v2, with read (the file's content, and
// whether it exists), which reads them inside the container.
func ReadCgroupLimits(t testing.TB, read func(path string) (string, bool)) CgroupLimits {
	t.Helper()
	get := func(path string) string {
		v, ok := read(path)
		require.True(t, ok, "%s exists inside the container", path)
		return strings.TrimSpace(v)
	}
	if _, v2 := read("/sys/fs/cgroup/cgroup.controllers"); v2 {
		quota, period, ok := strings.Cut(get("/sys/fs/cgroup/cpu.max"), " ")
		require.True(t, ok, "cpu.max is \"<quota> <period>\"")
		return CgroupLimits{
			Version: "v2",
			Memory:  parseCgroupValue(t, get("/sys/fs/cgroup/memory.max")),
			CPUs:    cpuRatio(t, quota, period),
			Pids:    parseCgroupValue(t, get("/sys/fs/cgroup/pids.max")),
		}
	}
	memory := parseCgroupValue(t, get("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
	if memory >= math.MaxInt64&^0xfff { // v1 "no limit" is the page-rounded max
		memory = -1
	}
	return CgroupLimits{
		Version: "v1",
		Memory:  memory,
		CPUs:    cpuRatio(t, get("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), get("/sys/fs/cgroup/cpu/cpu.cfs_period_us")),
		Pids:    parseCgroupValue(t, get("/sys/fs/cgroup/pids/pids.max")),
	}
}

// parseCgroupValue parses a cgroup number, "max" being -1.
func parseCgroupValue(t testing.TB, v string) int64 {
	t.Helper()
	if v == "max" {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err, "cgroup value %q", v)
	return n
}

// cpuRatio is quota/period in cores, -1 when there is no quota.
func cpuRatio(t testing.TB, quota, period string) float64 {
	t.Helper()
	q := parseCgroupValue(t, quota)
	if q < 0 {
		return -1
	}
	p := parseCgroupValue(t, period)
	require.Positive(t, p, "CFS period")
	return float64(q) / float64(p)
}
