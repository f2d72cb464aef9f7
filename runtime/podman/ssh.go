package podman

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// An ssh:// endpoint is reached as Docker's CLI reaches one: each HTTP
// connection is an `ssh` process of the system's OpenSSH client, in batch
// mode (no prompts), whose remote command `podman system dial-stdio`
// joins its stdio to the service's socket (the URL's path, or the remote
// user's default service without one). The user's ssh configuration,
// agent and known_hosts apply as they do at a shell; a password in the
// URL is refused (a key or an agent is how a batch client logs in).

// sshPingTimeout bounds the first ping over ssh, whose handshake and
// remote login come before the service's answer.
const sshPingTimeout = 15 * time.Second

// sshArgs builds the ssh command line for u: options, then "--", the
// destination and the remote command. extra are the caller's options
// (WithSSHOptions); CONTAINER_SSHKEY (Podman's own variable) names an
// identity file. No argument carries a secret.
func sshArgs(u *url.URL, dialTimeout time.Duration, extra []string, getenv func(string) string) ([]string, error) {
	if u.Hostname() == "" {
		return nil, errors.New("invalid endpoint: ssh URI without a host")
	}
	if _, set := u.User.Password(); set {
		return nil, errors.New("invalid endpoint: an ssh URI with a password (the ssh client runs in batch mode: use a key, CONTAINER_SSHKEY or an ssh agent)")
	}
	secs := int(dialTimeout.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	args := []string{"-o", "BatchMode=yes", "-o", "ConnectTimeout=" + strconv.Itoa(secs)}
	if p := u.Port(); p != "" {
		args = append(args, "-p", p)
	}
	if name := u.User.Username(); name != "" {
		args = append(args, "-l", name)
	}
	if key := getenv("CONTAINER_SSHKEY"); key != "" {
		args = append(args, "-i", key)
	}
	args = append(args, extra...)
	remote := "podman system dial-stdio"
	if u.Path != "" && u.Path != "/" {
		remote = "podman --url " + shellQuote("unix://"+u.Path) + " system dial-stdio"
	}
	return append(args, "--", u.Hostname(), remote), nil
}

// shellQuote quotes s for the remote user's shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sshDialer returns a dial function that starts one ssh process per
// connection.
func sshDialer(args []string) func(ctx context.Context, _, _ string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := startSSH(args)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: "ssh", Err: err}
		}
		return c, nil
	}
}

// sshConn is a net.Conn over an ssh process's stdin and stdout, which are
// pipes of this process's own (so reading never races the process's exit,
// and deadlines work).
type sshConn struct {
	cmd    *exec.Cmd
	stdin  *os.File // writes go to ssh's stdin
	stdout *os.File // reads come from ssh's stdout
	stderr *tail
	done   chan struct{} // closed once the process was waited for
	err    error         // the process's exit, once done
	close  sync.Once
}

func startSSH(args []string) (*sshConn, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	c := &sshConn{stdin: inW, stdout: outR, stderr: &tail{max: 4096}, done: make(chan struct{})}
	c.cmd = exec.Command("ssh", args...)
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = inR, outW, c.stderr
	err = c.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// Read reads what the service sent; when ssh has exited with an error
// (a refused login, an unknown host key), the error says what ssh printed.
func (c *sshConn) Read(p []byte) (int, error) {
	n, err := c.stdout.Read(p)
	if err != nil && n == 0 {
		if exit := c.exited(); exit != nil {
			return 0, &net.OpError{Op: "read", Net: "ssh", Err: exit}
		}
	}
	return n, err
}

// exited is ssh's failure, if it has exited with one within a moment.
func (c *sshConn) exited() error {
	select {
	case <-c.done:
	case <-time.After(time.Second):
		return nil
	}
	if c.err == nil {
		return nil
	}
	if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
		return fmt.Errorf("ssh: %s (%w)", msg, c.err)
	}
	return fmt.Errorf("ssh: %w", c.err)
}

func (c *sshConn) Write(p []byte) (int, error) { return c.stdin.Write(p) }

// Close ends the ssh process and releases the pipes.
func (c *sshConn) Close() error {
	c.close.Do(func() {
		c.stdin.Close()
		if c.cmd.Process != nil {
			_ = c.cmd.Process.Kill()
		}
		<-c.done
		c.stdout.Close()
	})
	return nil
}

func (c *sshConn) LocalAddr() net.Addr  { return sshAddr{} }
func (c *sshConn) RemoteAddr() net.Addr { return sshAddr{} }
func (c *sshConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}
func (c *sshConn) SetReadDeadline(t time.Time) error  { return c.stdout.SetReadDeadline(t) }
func (c *sshConn) SetWriteDeadline(t time.Time) error { return c.stdin.SetWriteDeadline(t) }

// sshAddr is the address of either end of an sshConn.
type sshAddr struct{}

func (sshAddr) Network() string { return "ssh" }
func (sshAddr) String() string  { return "ssh" }

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
