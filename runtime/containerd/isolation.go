package containerd

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// The adapter's own iptables rules isolate its networks' bridges (the CNI
// firewall plugin's rules let every container's traffic through the
// FORWARD chain, to any other bridge too). They live in the mangle table,
// whose FORWARD and INPUT hooks run before the filter table's, so that no
// ACCEPT of the firewall plugin, Docker or kube-proxy in filter comes
// first, and nobody else's chain order matters. Each network's rules
// carry a comment naming it; RemoveNetwork deletes them, and the chains
// with the last of them.
const (
	// IsolationChainPrefix starts the names of the adapter's own iptables
	// chains (mangle table), so that a clean-up (internal/sweep) can tell
	// them from anyone else's.
	IsolationChainPrefix = "SBX-ISOLATION-"
	// isolationForward is the mangle chain FORWARD jumps to.
	isolationForward = IsolationChainPrefix + "FWD"
	// isolationInput is the mangle chain INPUT jumps to.
	isolationInput = IsolationChainPrefix + "IN"
	// iptablesTimeout bounds one iptables command (its -w lock wait
	// included).
	iptablesTimeout = 30 * time.Second
)

// iptablesRule is one rule of a chain of the mangle table.
type iptablesRule struct {
	chain string
	spec  []string
}

// isolationRules are the rules of a network's bridge:
//   - every network: no new connection enters the bridge from anywhere
//     else (another of the adapter's bridges, its default network's,
//     docker0, the outside); replies to the bridge's own connections do.
//     Connections from the host itself (published ports on 127.0.0.1)
//     never pass FORWARD.
//   - an internal network: nothing is forwarded out of the bridge, and no
//     new connection from it reaches the host's own addresses (the
//     gateway's included); the host still reaches its containers.
//
// Traffic between two containers of one bridge (br_netfilter sends it
// through FORWARD as in and out on the bridge) matches none of them.
func isolationRules(def *networkDef) []iptablesRule {
	comment := []string{"-m", "comment", "--comment", "sandboxer network " + def.Name}
	notReply := []string{"-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED"}
	rule := func(chain string, parts ...[]string) iptablesRule {
		var spec []string
		for _, p := range parts {
			spec = append(spec, p...)
		}
		return iptablesRule{chain: chain, spec: append(spec, "-j", "DROP")}
	}
	rules := []iptablesRule{
		rule(isolationForward, []string{"!", "-i", def.Bridge, "-o", def.Bridge}, notReply, comment),
	}
	if def.Internal {
		rules = append(rules,
			rule(isolationForward, []string{"-i", def.Bridge, "!", "-o", def.Bridge}, comment),
			rule(isolationInput, []string{"-i", def.Bridge}, notReply, comment),
		)
	}
	return rules
}

// iptables runs iptables on the mangle table, bounded by iptablesTimeout.
func iptables(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), iptablesTimeout)
	defer cancel()
	args = append([]string{"-w", "10", "-t", "mangle"}, args...)
	out, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput()
	if err != nil {
		return &iptablesError{args: args, out: strings.TrimSpace(string(out)), err: err}
	}
	return nil
}

// iptablesError is a failed iptables command.
type iptablesError struct {
	args []string
	out  string
	err  error
}

func (e *iptablesError) Error() string {
	return fmt.Sprintf("iptables %s: %v: %s", strings.Join(e.args, " "), e.err, e.out)
}

func (e *iptablesError) Unwrap() error { return e.err }

// absent tells whether a failed check (-C) or delete (-D) says the rule or
// chain is not there (exit status 1), rather than that iptables failed.
func absent(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 1
}

// hookOf is the built-in chain that jumps to one of the adapter's chains.
func hookOf(chain string) string {
	if chain == isolationInput {
		return "INPUT"
	}
	return "FORWARD"
}

// ensureChain makes one of the adapter's chains and the jump to it, if
// either is missing.
func ensureChain(ctx context.Context, chain string) error {
	if err := iptables(ctx, "-N", chain); err != nil && !chainExists(err) {
		return err
	}
	jump := []string{hookOf(chain), "-j", chain}
	if err := iptables(ctx, append([]string{"-C"}, jump...)...); err != nil {
		if !absent(err) {
			return err
		}
		return iptables(ctx, append([]string{"-I", jump[0], "1"}, jump[1:]...)...)
	}
	return nil
}

// chainExists tells whether iptables -N failed because the chain exists.
func chainExists(err error) bool {
	var ie *iptablesError
	return errors.As(err, &ie) && (strings.Contains(ie.out, "exists") || strings.Contains(ie.out, "File exists"))
}

// isolated tells whether every rule of def is in place (with the jumps
// to the chains), without changing anything.
func isolated(ctx context.Context, def *networkDef) (bool, error) {
	for _, rl := range isolationRules(def) {
		for _, check := range [][]string{{hookOf(rl.chain), "-j", rl.chain}, append([]string{rl.chain}, rl.spec...)} {
			if err := iptables(ctx, append([]string{"-C"}, check...)...); err != nil {
				if absent(err) || chainMissing(err) {
					return false, nil
				}
				return false, err
			}
		}
	}
	return true, nil
}

// chainMissing tells whether a check failed because the chain is not
// there (nf_tables' iptables says so with exit status 2 or 1).
func chainMissing(err error) bool {
	var ie *iptablesError
	return errors.As(err, &ie) && (strings.Contains(ie.out, "No chain") || strings.Contains(ie.out, "does not exist"))
}

// isolate installs def's rules (and the chains), each once.
func (r *Runtime) isolate(ctx context.Context, def *networkDef) error {
	for _, rl := range isolationRules(def) {
		if err := ensureChain(ctx, rl.chain); err != nil {
			return err
		}
		if err := iptables(ctx, append([]string{"-C", rl.chain}, rl.spec...)...); err == nil {
			continue
		} else if !absent(err) {
			return err
		}
		if err := iptables(ctx, append([]string{"-A", rl.chain}, rl.spec...)...); err != nil {
			return err
		}
	}
	return nil
}

// ensureIsolated installs def's rules if any is missing (a definition an
// older adapter made, rules someone flushed), under the network lock.
func (r *Runtime) ensureIsolated(ctx context.Context, def *networkDef) error {
	ok, err := isolated(ctx, def)
	if err != nil || ok {
		return err
	}
	unlock, err := r.lockNetworks()
	if err != nil {
		return fmt.Errorf("lock the network definitions: %w", err)
	}
	defer unlock()
	return r.isolate(ctx, def)
}

// unisolate deletes def's rules (both kinds, whatever def.Internal says,
// so that nothing of an older definition stays), and each chain of the
// adapter that is left empty with the jump to it. Absent rules and chains
// are fine.
func (r *Runtime) unisolate(ctx context.Context, def *networkDef) error {
	all := *def
	all.Internal = true
	var errs []error
	for _, rl := range isolationRules(&all) {
		for {
			err := iptables(ctx, append([]string{"-D", rl.chain}, rl.spec...)...)
			if err == nil {
				continue // a rule added twice by a race goes too
			}
			if !absent(err) && !chainMissing(err) {
				errs = append(errs, err)
			}
			break
		}
	}
	for _, chain := range []string{isolationForward, isolationInput} {
		if err := dropChainIfEmpty(ctx, chain); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dropChainIfEmpty deletes one of the adapter's chains, and the jump to
// it, when it holds no rule.
func dropChainIfEmpty(ctx context.Context, chain string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), iptablesTimeout)
	defer cancel()
	out, err := exec.CommandContext(cctx, "iptables", "-w", "10", "-t", "mangle", "-S", chain).CombinedOutput()
	if err != nil {
		return nil // no such chain
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "-A ") {
			return nil // still in use
		}
	}
	for {
		if err := iptables(ctx, "-D", hookOf(chain), "-j", chain); err != nil {
			if !absent(err) && !chainMissing(err) {
				return err
			}
			break
		}
	}
	if err := iptables(ctx, "-X", chain); err != nil && !absent(err) && !chainMissing(err) {
		return err
	}
	return nil
}
