package main

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/roboco/sandboxer/runtime/containerd"
)

// The chains CNI's plugins create, by their names: portmap's DNAT chain per
// container (CNI-DN-<hash>) and its shared plumbing, and every CNI chain
// in general (the firewall plugin's CNI-FORWARD and CNI-ADMIN, bridge's
// masquerade chains).
const (
	cniChainPrefix    = "CNI-"
	dnatChainPrefix   = "CNI-DN-"
	hostportDNATChain = "CNI-HOSTPORT-DNAT"
)

// hostportPlumbing are portmap's masquerade chains, which serve no one once
// no CNI-HOSTPORT-DNAT chain is left (they hold rules, so the removal of
// empty chains never takes them).
var hostportPlumbing = []string{"CNI-HOSTPORT-MASQ", "CNI-HOSTPORT-SETMARK"}

// splitRule splits one line of `iptables -S` into the arguments iptables
// would build from it, by iptables-restore's own rules (iptables-save and
// -S write what it reads): arguments are separated by blanks; a double
// quote opens and closes a quoted run, inside which a backslash takes the
// next character literally (iptables writes \" \\ and \' there); outside
// quotes every other character, single quote and # included, is literal.
// Shell-style splitters (github.com/google/shlex and the like) differ on
// exactly those: they read # as a comment and ' as a quote, so an
// interface named "#x" would cut the rule short.
func splitRule(line string) ([]string, error) {
	var (
		args    []string
		arg     strings.Builder
		inArg   bool
		quoted  bool
		escaped bool
	)
	for _, c := range line {
		switch {
		case escaped:
			arg.WriteRune(c)
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
			inArg = true
		case !quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			if inArg {
				args = append(args, arg.String())
				arg.Reset()
				inArg = false
			}
		default:
			arg.WriteRune(c)
			inArg = true
		}
	}
	if quoted || escaped {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if inArg {
		args = append(args, arg.String())
	}
	return args, nil
}

// quoteArg writes one argument back in the form iptables -S uses, so that
// what the sweep prints can be read (and pasted) as iptables' own output.
func quoteArg(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"\\'") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `'`, `\'`)
	return `"` + r.Replace(s) + `"`
}

// rule is one "-A CHAIN ARGS..." line of a table's listing.
type rule struct {
	chain string
	args  []string // what follows the chain name
}

// target is the chain or target the rule jumps (-j) or goes (-g) to.
func (r rule) target() string {
	for i := 0; i+1 < len(r.args); i++ {
		switch r.args[i] {
		case "-j", "--jump", "-g", "--goto":
			return r.args[i+1]
		}
	}
	return ""
}

// table is what `iptables -t NAME -S` lists: the user-defined chains and
// every rule, in the listing's order.
type table struct {
	name   string
	chains []string
	rules  []rule
}

// parseTable reads the output of `iptables -t name -S`.
func parseTable(name, listing string) (*table, error) {
	t := &table{name: name}
	for _, line := range strings.Split(listing, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		args, err := splitRule(line)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", name, err)
		}
		if len(args) < 2 {
			return nil, fmt.Errorf("table %s: unexpected line %q", name, line)
		}
		switch args[0] {
		case "-P": // a built-in chain's policy: never ours to change
		case "-N":
			t.chains = append(t.chains, args[1])
		case "-A":
			t.rules = append(t.rules, rule{chain: args[1], args: args[2:]})
		default:
			return nil, fmt.Errorf("table %s: unexpected line %q", name, line)
		}
	}
	return t, nil
}

// owner tells the adapter's rules from everyone else's.
type owner struct {
	// pool is the adapter's address range: a rule naming an address in it
	// (a container's, its /24's, a DNAT destination) is the adapter's.
	pool netip.Prefix
	// ownsBridge tells the adapter's bridges: a rule matching on one of
	// them as an interface is the adapter's.
	ownsBridge func(name string) bool
	// ids are containers known to have been left behind: a rule whose
	// comment names one (portmap's `dnat name: "net" id: "ID"`) is theirs.
	ids []string
}

// ipv4 finds the dotted quads in an argument: "10.213.0.5",
// "10.213.0.0/24", "10.213.0.5:80", "10.213.0.5-10.213.0.9".
var ipv4 = regexp.MustCompile(`\d{1,3}(?:\.\d{1,3}){3}`)

// interfaceOptions are the iptables options whose value is an interface.
var interfaceOptions = []string{"-i", "--in-interface", "-o", "--out-interface", "--physdev-in", "--physdev-out"}

// owns tells whether a rule is the adapter's: it names an address of the
// pool, matches on one of its bridges, or its comment names a leftover
// container. An address outside the pool (10.0.0.0/8, 110.213.0.1) makes a
// rule no one's in particular, and it stays.
func (o owner) owns(r rule) bool {
	for i, a := range r.args {
		for _, s := range ipv4.FindAllString(a, -1) {
			if addr, err := netip.ParseAddr(s); err == nil && o.pool.Contains(addr) {
				return true
			}
		}
		if i == 0 {
			continue
		}
		switch prev := r.args[i-1]; {
		case slices.Contains(interfaceOptions, prev):
			if o.ownsBridge(strings.TrimSuffix(a, "+")) {
				return true
			}
		case prev == "--comment":
			for _, id := range o.ids {
				if strings.Contains(a, `id: "`+id+`"`) {
					return true
				}
			}
		}
	}
	return false
}

// plan lists the iptables commands (the arguments after `-t TABLE`) that
// remove the adapter's rules from the table and then the CNI chains they
// leave dead, in an order each command can run in:
//
//  1. every rule the owner owns (-D with the rule as listed);
//  2. every CNI-DN-* chain that held such a rule, or that nothing jumps to,
//     with the rules that jump to it: portmap makes one per container, so
//     a DNAT to the pool makes the whole chain the adapter's (its
//     127.0.0.1 hairpin rule names no address of the pool), and one that
//     nothing jumps to does nothing;
//  3. every CNI-* chain (and the adapter's own isolation chains,
//     containerd.IsolationChainPrefix) left empty, with the rules that jump to it, until
//     no chain empties further;
//  4. in nat, portmap's masquerade plumbing once no CNI-HOSTPORT-DNAT is
//     left.
//
// A chain that still holds someone else's rule is never empty, so it stays,
// and so do the rules that jump to it. plan only reads t's copy; it runs
// nothing.
func (t *table) plan(o owner) [][]string {
	var ops [][]string
	rules := slices.Clone(t.rules)
	chains := slices.Clone(t.chains)

	deleteRules := func(match func(rule) bool) {
		rules = slices.DeleteFunc(rules, func(r rule) bool {
			if match(r) {
				ops = append(ops, append([]string{"-D", r.chain}, r.args...))
				return true
			}
			return false
		})
	}
	jumpsTo := func(chain string) bool {
		return slices.ContainsFunc(rules, func(r rule) bool { return r.target() == chain })
	}
	holds := func(chain string) bool {
		return slices.ContainsFunc(rules, func(r rule) bool { return r.chain == chain })
	}
	// removeChain flushes a chain nothing jumps to and deletes it.
	removeChain := func(chain string) {
		if holds(chain) {
			ops = append(ops, []string{"-F", chain})
			rules = slices.DeleteFunc(rules, func(r rule) bool { return r.chain == chain })
		}
		ops = append(ops, []string{"-X", chain})
		chains = slices.DeleteFunc(chains, func(c string) bool { return c == chain })
	}

	ownedDNAT := map[string]bool{}
	for _, r := range rules {
		if strings.HasPrefix(r.chain, dnatChainPrefix) && o.owns(r) {
			ownedDNAT[r.chain] = true
		}
	}
	deleteRules(o.owns)
	for _, c := range slices.Clone(chains) {
		if strings.HasPrefix(c, dnatChainPrefix) && (ownedDNAT[c] || !jumpsTo(c)) {
			deleteRules(func(r rule) bool { return r.target() == c })
			removeChain(c)
		}
	}
	for changed := true; changed; {
		changed = false
		for _, c := range slices.Clone(chains) {
			if (strings.HasPrefix(c, cniChainPrefix) || strings.HasPrefix(c, containerd.IsolationChainPrefix)) && !holds(c) {
				deleteRules(func(r rule) bool { return r.target() == c })
				removeChain(c)
				changed = true
			}
		}
	}
	if t.name == "nat" && !slices.Contains(chains, hostportDNATChain) {
		for _, c := range hostportPlumbing {
			if slices.Contains(chains, c) {
				deleteRules(func(r rule) bool { return r.target() == c })
				removeChain(c)
			}
		}
	}
	return ops
}
