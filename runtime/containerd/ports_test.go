package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/runtime"
)

func TestParsePortRange(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want portRange
		bad  bool
	}{
		{name: "dash", in: "61000-65535", want: portRange{61000, 65535}},
		{name: "as the kernel writes it", in: "32768\t60999\n", want: portRange{32768, 60999}},
		{name: "one port", in: "7000-7000", want: portRange{7000, 7000}},
		{name: "reversed", in: "7001-7000", bad: true},
		{name: "zero", in: "0-10", bad: true},
		{name: "too high", in: "65000-65536", bad: true},
		{name: "one number", in: "61000", bad: true},
		{name: "not numbers", in: "a-b", bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePortRange(tc.in)
			if tc.bad {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDefaultHostPortRange(t *testing.T) {
	cases := []struct {
		name   string
		kernel string
		want   portRange
		bad    bool
	}{
		{name: "Linux default: above it", kernel: "32768\t60999\n", want: portRange{61000, 65535}},
		{name: "narrower: all above it", kernel: "40000 50000", want: portRange{50001, 65535}},
		{name: "up to the top: below it", kernel: "32768 65535", want: portRange{32768 - belowKernelRange, 32767}},
		{name: "up to the top, low: not under 1024", kernel: "2000 65535", want: portRange{1024, 1999}},
		{name: "everything: none left", kernel: "1024 65535", bad: true},
		{name: "garbage", kernel: "x", bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := defaultHostPortRange(tc.kernel)
			if tc.bad {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestHostPortRangeChoice: the option wins over the environment, which
// wins over the kernel-derived default; a bad range fails New.
func TestHostPortRangeChoice(t *testing.T) {
	kernel, err := os.ReadFile(kernelPortRangeFile)
	require.NoError(t, err)
	def, err := defaultHostPortRange(string(kernel))
	require.NoError(t, err)
	k, err := parsePortRange(string(kernel))
	require.NoError(t, err)
	assert.True(t, def.Last < k.First || def.First > k.Last, "the default range %s is clear of the kernel's %s", def, k)

	t.Setenv(EnvHostPortRange, "")
	r, err := New(WithAddress("/nonexistent.sock"))
	require.NoError(t, err)
	assert.Equal(t, def, r.portRange, "default")

	t.Setenv(EnvHostPortRange, "62000-62100")
	r, err = New(WithAddress("/nonexistent.sock"))
	require.NoError(t, err)
	assert.Equal(t, portRange{62000, 62100}, r.portRange, "environment")

	r, err = New(WithAddress("/nonexistent.sock"), WithHostPortRange(63000, 63010))
	require.NoError(t, err)
	assert.Equal(t, portRange{63000, 63010}, r.portRange, "option")

	_, err = New(WithAddress("/nonexistent.sock"), WithHostPortRange(63010, 63000))
	assert.ErrorContains(t, err, "63010-63000")
	t.Setenv(EnvHostPortRange, "nonsense")
	_, err = New(WithAddress("/nonexistent.sock"))
	assert.ErrorContains(t, err, EnvHostPortRange)
}

// TestPickPortSkips: a port that is taken (reserved) or held by a listener
// on the host IP, TCP or UDP, is never picked; a range with nothing free
// left is an error naming it.
func TestPickPortSkips(t *testing.T) {
	for _, proto := range []string{"tcp", "udp"} {
		t.Run(proto, func(t *testing.T) {
			first := freePair(t, proto)
			pr := portRange{first, first + 2}
			hold(t, proto, first)
			taken := map[portKey]bool{{proto, first + 2}: true}
			for range 20 {
				got, err := pickPort(pr, taken, proto, "127.0.0.1")
				require.NoError(t, err)
				assert.Equal(t, first+1, got)
			}
			taken[portKey{proto, first + 1}] = true
			_, err := pickPort(pr, taken, proto, "127.0.0.1")
			assert.ErrorContains(t, err, pr.String())
		})
	}
}

// freePair finds, in the default range (clear of what the kernel, Docker
// and Podman hand out), three consecutive ports that are free for proto.
func freePair(t *testing.T, proto string) int {
	t.Helper()
	for range 100 {
		p := 61000 + rand.IntN(65535-61000-2)
		if bindable(proto, "127.0.0.1", p) && bindable(proto, "127.0.0.1", p+1) && bindable(proto, "127.0.0.1", p+2) {
			return p
		}
	}
	t.Fatal("no three free consecutive ports in 61000-65535")
	return 0
}

// hold keeps a socket bound on 127.0.0.1:port until the test ends.
func hold(t *testing.T, proto string, port int) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var c io.Closer
	var err error
	if proto == "udp" {
		c, err = net.ListenPacket("udp4", addr)
	} else {
		c, err = net.Listen("tcp4", addr)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
}

// serveName runs a container that answers HTTP on 8080 with its own name,
// publishing 8080/tcp (and 8081/udp when udp is set) on ephemeral host
// ports.
func serveName(ctx context.Context, r *Runtime, image, name string, udp bool) (runtime.Container, error) {
	ports := []runtime.PortSpec{{ContainerPort: 8080}}
	if udp {
		ports = append(ports, runtime.PortSpec{ContainerPort: 8081, Protocol: "udp"})
	}
	return r.Run(ctx, runtime.RunSpec{
		Name:    name,
		Image:   image,
		Command: []string{"sh", "-c", "mkdir -p /tmp/www && echo " + name + " > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"},
		Labels:  map[string]string{testLabel: "1"},
		Ports:   ports,
	})
}

// answers polls the host port until the container behind it answers, and
// returns what it says.
func answers(t *testing.T, port int) string {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	client := &http.Client{Timeout: 2 * time.Second}
	var body string
	require.Eventually(t, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return false
		}
		body = string(b)
		return true
	}, 30*time.Second, 100*time.Millisecond, "nothing answers on %s", url)
	return body
}

// TestConcurrentRunsGetDistinctPorts: many runs at once, through two
// adapter instances (each takes the ports lock through its own open file,
// as two processes do), with host port 0 get distinct host ports, all in
// the adapter's range, each reserved in the state dir while the container
// lives and reaching that container; Remove releases them.
func TestConcurrentRunsGetDistinctPorts(t *testing.T) {
	first := newTestRuntime(t)
	second := newTestRuntime(t)
	busybox := testenv.Image(t, Name, "busybox")
	ctx := testContext(t)
	pr := first.portRange

	const n = 8
	names := make([]string, n)
	ran := make([]runtime.Container, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		names[i] = "sbx-test-" + randHex(4)
		track(t, first, names[i])
		r := first
		if i%2 == 1 {
			r = second
		}
		wg.Go(func() { ran[i], errs[i] = serveName(ctx, r, busybox, names[i], true) })
	}
	wg.Wait()

	seen := map[portKey]string{}
	for i := range n {
		require.NoError(t, errs[i], "run %s", names[i])
		require.Len(t, ran[i].Ports, 2, "%s: %+v", names[i], ran[i].Ports)
		for _, p := range ran[i].Ports {
			assert.Equal(t, runtime.DefaultHostIP, p.HostIP)
			assert.True(t, p.HostPort >= pr.First && p.HostPort <= pr.Last, "%s: host port %d outside the range %s", names[i], p.HostPort, pr)
			k := portKey{p.Protocol, p.HostPort}
			if other, dup := seen[k]; dup {
				t.Errorf("%s and %s both got %d/%s", other, names[i], p.HostPort, p.Protocol)
			}
			seen[k] = names[i]
		}
		rv := readReservation(t, first, ran[i].ID)
		assert.ElementsMatch(t, ran[i].Ports, rv.Ports, "reserved as published")
	}
	for i := range n {
		assert.Equal(t, names[i]+"\n", answers(t, ran[i].Ports[0].HostPort), "the port reaches its own container")
	}

	require.NoError(t, second.Remove(ctx, names[0]))
	assert.NoFileExists(t, first.reservationFile(first.namespace, ran[0].ID), "released by Remove")
}

// readReservation reads a container's host port reservation.
func readReservation(t *testing.T, r *Runtime, id string) reservation {
	t.Helper()
	b, err := os.ReadFile(r.reservationFile(r.namespace, id))
	require.NoError(t, err, "the reservation of %s", id)
	var rv reservation
	require.NoError(t, json.Unmarshal(b, &rv))
	return rv
}

// TestRunSkipsHeldAndReservedPorts: in a range of two ports, the one a
// host listener holds on 127.0.0.1 is skipped; once the other is published
// the range is full and a run fails, leaving nothing; Remove frees it for
// the next run; a reservation whose container is gone does not hold its
// port; an explicit host port is published as asked.
func TestRunSkipsHeldAndReservedPorts(t *testing.T) {
	busybox := testenv.Image(t, Name, "busybox")
	ctx := testContext(t)
	p := freePair(t, "tcp")
	t.Setenv(EnvHostPortRange, fmt.Sprintf("%d-%d", p, p+1))
	r := newTestRuntime(t)
	require.Equal(t, portRange{p, p + 1}, r.portRange)
	hold(t, "tcp", p)

	one := "sbx-test-" + randHex(4)
	track(t, r, one)
	c, err := serveName(ctx, r, busybox, one, false)
	require.NoError(t, err)
	require.Len(t, c.Ports, 1)
	assert.Equal(t, p+1, c.Ports[0].HostPort, "the held port is skipped")
	assert.Equal(t, one+"\n", answers(t, p+1))

	two := "sbx-test-" + randHex(4)
	track(t, r, two)
	_, err = serveName(ctx, r, busybox, two, false)
	require.Error(t, err, "no free port left in the range")
	assert.ErrorContains(t, err, fmt.Sprintf("%d-%d", p, p+1))
	_, err = r.Inspect(ctx, two)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "nothing left of the failed run")
	assert.Empty(t, allocationsOf(t, r, two), "no IP left allocated to it")

	require.NoError(t, r.Remove(ctx, one))
	c, err = serveName(ctx, r, busybox, two, false)
	require.NoError(t, err, "removal frees the port")
	assert.Equal(t, p+1, c.Ports[0].HostPort)
	require.NoError(t, r.Remove(ctx, two))

	t.Run("a stale reservation does not hold its port", func(t *testing.T) {
		ghost := "sbx-test-ghost-" + randHex(4)
		require.NoError(t, r.reserve(ghost, []runtime.PortBinding{{ContainerPort: 1, Protocol: "tcp", HostIP: runtime.DefaultHostIP, HostPort: p + 1}}))
		name := "sbx-test-" + randHex(4)
		track(t, r, name)
		c, err := serveName(ctx, r, busybox, name, false)
		require.NoError(t, err)
		assert.Equal(t, p+1, c.Ports[0].HostPort)
		assert.NoFileExists(t, r.reservationFile(r.namespace, ghost), "dropped")
	})

	t.Run("an explicit host port is kept", func(t *testing.T) {
		explicit := freePair(t, "tcp")
		name := "sbx-test-" + randHex(4)
		track(t, r, name)
		c, err := r.Run(ctx, runtime.RunSpec{
			Name: name, Image: busybox, Labels: map[string]string{testLabel: "1"},
			Command: []string{"sleep", "600"},
			Ports:   []runtime.PortSpec{{ContainerPort: 8080, HostPort: explicit}},
		})
		require.NoError(t, err)
		require.Len(t, c.Ports, 1)
		assert.Equal(t, explicit, c.Ports[0].HostPort)
		assert.Equal(t, []runtime.PortBinding{c.Ports[0]}, readReservation(t, r, c.ID).Ports, "reserved too")
	})
}
