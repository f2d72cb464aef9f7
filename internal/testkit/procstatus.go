package testkit

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// ProcStatus is the confinement a process runs under, as the kernel
// reports it in /proc/<pid>/status: read inside a container (through the
// runtime's own exec), it proves what the runtime applied, whatever the
// adapter asked for.
type ProcStatus struct {
	// Seccomp is 0 (none), 1 (strict) or 2 (a filter).
	Seccomp int
	// NoNewPrivs is 1 when no_new_privs is set.
	NoNewPrivs int
	// The capability sets, one bit per capability (CAP_CHOWN is bit 0).
	CapInh, CapPrm, CapEff, CapBnd, CapAmb uint64
}

// ParseProcStatus reads a /proc/<pid>/status; every field of ProcStatus
// must be there.
func ParseProcStatus(t testing.TB, text string) ProcStatus {
	t.Helper()
	var st ProcStatus
	ints := map[string]*int{"Seccomp": &st.Seccomp, "NoNewPrivs": &st.NoNewPrivs}
	masks := map[string]*uint64{"CapInh": &st.CapInh, "CapPrm": &st.CapPrm, "CapEff": &st.CapEff, "CapBnd": &st.CapBnd, "CapAmb": &st.CapAmb}
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		if p, ok := ints[key]; ok {
			n, err := strconv.Atoi(val)
			require.NoError(t, err, "%s in /proc/<pid>/status", line)
			*p, seen[key] = n, true
		}
		if p, ok := masks[key]; ok {
			n, err := strconv.ParseUint(val, 16, 64)
			require.NoError(t, err, "%s in /proc/<pid>/status", line)
			*p, seen[key] = n, true
		}
	}
	for _, key := range []string{"Seccomp", "NoNewPrivs", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		require.True(t, seen[key], "no %s line in /proc/<pid>/status:\n%s", key, text)
	}
	return st
}

// capabilityBits are the kernel's capability numbers by the names
// capabilities(7) gives them, without "CAP_".
var capabilityBits = map[string]int{
	"CHOWN": unix.CAP_CHOWN, "DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH,
	"FOWNER": unix.CAP_FOWNER, "FSETID": unix.CAP_FSETID, "KILL": unix.CAP_KILL, "SETGID": unix.CAP_SETGID,
	"SETUID": unix.CAP_SETUID, "SETPCAP": unix.CAP_SETPCAP, "LINUX_IMMUTABLE": unix.CAP_LINUX_IMMUTABLE,
	"NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE, "NET_BROADCAST": unix.CAP_NET_BROADCAST,
	"NET_ADMIN": unix.CAP_NET_ADMIN, "NET_RAW": unix.CAP_NET_RAW, "IPC_LOCK": unix.CAP_IPC_LOCK,
	"IPC_OWNER": unix.CAP_IPC_OWNER, "SYS_MODULE": unix.CAP_SYS_MODULE, "SYS_RAWIO": unix.CAP_SYS_RAWIO,
	"SYS_CHROOT": unix.CAP_SYS_CHROOT, "SYS_PTRACE": unix.CAP_SYS_PTRACE, "SYS_PACCT": unix.CAP_SYS_PACCT,
	"SYS_ADMIN": unix.CAP_SYS_ADMIN, "SYS_BOOT": unix.CAP_SYS_BOOT, "SYS_NICE": unix.CAP_SYS_NICE,
	"SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "SYS_TIME": unix.CAP_SYS_TIME, "SYS_TTY_CONFIG": unix.CAP_SYS_TTY_CONFIG,
	"MKNOD": unix.CAP_MKNOD, "LEASE": unix.CAP_LEASE, "AUDIT_WRITE": unix.CAP_AUDIT_WRITE,
	"AUDIT_CONTROL": unix.CAP_AUDIT_CONTROL, "SETFCAP": unix.CAP_SETFCAP, "MAC_OVERRIDE": unix.CAP_MAC_OVERRIDE,
	"MAC_ADMIN": unix.CAP_MAC_ADMIN, "SYSLOG": unix.CAP_SYSLOG, "WAKE_ALARM": unix.CAP_WAKE_ALARM,
	"BLOCK_SUSPEND": unix.CAP_BLOCK_SUSPEND, "AUDIT_READ": unix.CAP_AUDIT_READ, "PERFMON": unix.CAP_PERFMON,
	"BPF": unix.CAP_BPF, "CHECKPOINT_RESTORE": unix.CAP_CHECKPOINT_RESTORE,
}

// CapabilityMask is the set of the named capabilities ("CHOWN" or
// "CAP_CHOWN") as /proc/<pid>/status writes a set; it ends the test on a
// name the kernel does not have.
func CapabilityMask(t testing.TB, names ...string) uint64 {
	t.Helper()
	var m uint64
	for _, n := range names {
		b, ok := capabilityBits[strings.TrimPrefix(strings.ToUpper(n), "CAP_")]
		require.True(t, ok, "unknown capability %q", n)
		m |= 1 << b
	}
	return m
}

// CapabilityNames names the capabilities of a set, sorted, for messages.
func CapabilityNames(mask uint64) []string {
	var out []string
	for name, b := range capabilityBits {
		if mask&(1<<b) != 0 {
			out = append(out, name)
			mask &^= 1 << b
		}
	}
	slices.Sort(out)
	for mask != 0 {
		b := bits.TrailingZeros64(mask)
		out = append(out, fmt.Sprintf("cap_%d", b))
		mask &^= 1 << b
	}
	return out
}

// AssertConfined asserts that status, a /proc/<pid>/status read inside a
// container, shows the port's confinement (runtime/confine.go): a seccomp
// filter (the runtime's default profile), no_new_privs, caps as the
// bounding set, an effective set within it, nothing inheritable or
// ambient, and never NET_RAW or SYS_ADMIN. It returns what it parsed.
func AssertConfined(t testing.TB, what, status string, caps []string) ProcStatus {
	t.Helper()
	st := ParseProcStatus(t, status)
	want := CapabilityMask(t, caps...)
	assert.Equal(t, 2, st.Seccomp, "%s: Seccomp (2: a filter, the runtime's default profile)", what)
	assert.Equal(t, 1, st.NoNewPrivs, "%s: NoNewPrivs", what)
	assert.Equal(t, CapabilityNames(want), CapabilityNames(st.CapBnd), "%s: CapBnd is the spec's capabilities", what)
	assert.Zero(t, st.CapEff&^st.CapBnd, "%s: CapEff within CapBnd", what)
	assert.Zero(t, st.CapInh|st.CapAmb, "%s: no inheritable or ambient capability", what)
	held := st.CapEff | st.CapPrm | st.CapBnd
	assert.Zero(t, held&CapabilityMask(t, "NET_RAW", "SYS_ADMIN"), "%s: NET_RAW or SYS_ADMIN held (%v)", what, CapabilityNames(held))
	return st
}
