package janitor

// DefaultPrefix is the label prefix used when Options.Prefix is empty; the
// provisioner uses the same default.
const DefaultPrefix = "roboco"

// SandboxLabel is the label key (value "1") that marks a sandbox:
// "<prefix>.sandbox".
func SandboxLabel(prefix string) string { return prefix + ".sandbox" }

// OwnerLabel is the label key whose value names the sandbox's owner
// container: "<prefix>.sandbox.owner".
func OwnerLabel(prefix string) string { return prefix + ".sandbox.owner" }

// EngineLabel is the label key whose value is the sandbox's engine name:
// "<prefix>.sandbox.engine".
func EngineLabel(prefix string) string { return prefix + ".sandbox.engine" }

// Process-owner label keys, each "<prefix>.sandbox.owner.<suffix>".
const (
	procBootSuffix  = ".boot"
	procNSSuffix    = ".pidns"
	procPIDSuffix   = ".pid"
	procStartSuffix = ".start"
)

func procLabel(prefix, suffix string) string { return OwnerLabel(prefix) + suffix }
