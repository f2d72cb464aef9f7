package runtime

import (
	"slices"
	"strings"
)

// The confinement every adapter gives every container, whatever the run
// spec (the port's contract, asserted by the conformance suite):
//   - the runtime's default seccomp profile (Docker's, Podman's, the copy
//     containerd ships, the CRI's RuntimeDefault);
//   - no-new-privileges: no setuid binary, no file capability raises a
//     process's privileges (Kubernetes: allowPrivilegeEscalation false);
//   - the capabilities of RunSpec.Capabilities and no other, in the
//     bounding set too: every other capability is dropped ("drop ALL").
//
// What a container may keep is PermittedCapabilities: the capabilities of
// the Pod Security Standards' "baseline" profile, which are the runtimes'
// own defaults less NET_RAW. NET_RAW (raw sockets: spoofing on the
// sandbox's network) and SYS_ADMIN are never granted.

// PermittedCapabilities are the capabilities a run spec may ask for
// (RunSpec.Capabilities), spelt as capabilities(7) spells them without
// "CAP_": those of the Pod Security Standards' baseline profile.
var PermittedCapabilities = []string{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// normalizeCapabilities checks caps against PermittedCapabilities and
// returns them upper-cased, without the "CAP_" prefix, sorted and each
// once; nil when there are none.
func normalizeCapabilities(caps []string) ([]string, error) {
	var out []string
	for _, c := range caps {
		name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(c)), "CAP_")
		if !slices.Contains(PermittedCapabilities, name) {
			return nil, invalidf("capability %q is not one a sandbox may keep (permitted: %s)", c, strings.Join(PermittedCapabilities, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// CapabilityNames are the spec's capabilities as the kernel and the OCI
// runtime spec name them ("CAP_CHOWN"), for the adapters whose backend
// takes that form. The spec must be normalised.
func (s RunSpec) CapabilityNames() []string {
	out := make([]string, len(s.Capabilities))
	for i, c := range s.Capabilities {
		out[i] = "CAP_" + c
	}
	return out
}
