package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// console is stderr: log lines, and on a terminal a block of status lines
// (pull progress) kept below them. Writes are serialised; a log line is
// written above the status block, which is redrawn after it.
type console struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	width  int
	status []string
	drawn  int // status lines on screen
}

func newConsole(w io.Writer) *console {
	c := &console{w: w, width: 100}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		c.tty = true
		if wd, _, err := term.GetSize(int(f.Fd())); err == nil && wd > 20 {
			c.width = wd - 1
		}
	}
	return c
}

// Write writes log output above the status block.
func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clear()
	n, err := c.w.Write(p)
	c.draw()
	return n, err
}

// SetStatus replaces the status block (terminal only; elsewhere a no-op).
func (c *console) SetStatus(lines []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tty {
		return
	}
	c.clear()
	c.status = slices.Clone(lines)
	c.draw()
}

// Finish leaves the status block on screen as plain lines and forgets it.
func (c *console) Finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drawn > 0 {
		io.WriteString(c.w, "\n")
	}
	c.status, c.drawn = nil, 0
}

func (c *console) clear() {
	if !c.tty || c.drawn == 0 {
		return
	}
	s := "\r"
	if c.drawn > 1 {
		s += fmt.Sprintf("\x1b[%dA", c.drawn-1)
	}
	io.WriteString(c.w, s+"\x1b[J")
	c.drawn = 0
}

func (c *console) draw() {
	if !c.tty || len(c.status) == 0 {
		return
	}
	var b strings.Builder
	for i, l := range c.status {
		if i > 0 {
			b.WriteByte('\n')
		}
		if r := []rune(l); len(r) > c.width {
			l = string(r[:c.width])
		}
		b.WriteString("\x1b[K" + l)
	}
	io.WriteString(c.w, b.String())
	c.drawn = len(c.status)
}

// pulls renders image pull progress from provisioning events: on a
// terminal, one live line per image with bytes and percent; elsewhere, a
// log line per image at most every plainEvery. Start and end of each pull
// are the provisioner's own log lines.
type pulls struct {
	mu      sync.Mutex
	console *console
	log     *slog.Logger
	order   []string
	images  map[string]*pull
	now     func() time.Time
	lastTTY time.Time
}

type pull struct {
	service string
	start   time.Time
	end     time.Time
	layers  map[string][2]int64 // current, total
	status  string
	logged  time.Time
}

const (
	ttyEvery   = 100 * time.Millisecond
	plainEvery = 5 * time.Second
)

func newPulls(c *console, log *slog.Logger) *pulls {
	return &pulls{console: c, log: log, images: map[string]*pull{}, now: time.Now}
}

// event takes one provisioning event. It is called concurrently.
func (p *pulls) event(ev provision.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	switch ev.Kind {
	case provision.EventPullStart:
		if _, ok := p.images[ev.Image]; !ok {
			p.order = append(p.order, ev.Image)
			p.images[ev.Image] = &pull{service: ev.Service, start: now, logged: now, layers: map[string][2]int64{}}
		}
	case provision.EventPullProgress:
		pl := p.images[ev.Image]
		if pl == nil || ev.Progress == nil {
			return
		}
		pl.update(*ev.Progress)
		if !p.console.tty && now.Sub(pl.logged) >= plainEvery {
			pl.logged = now
			cur, total := pl.bytes()
			p.log.Info("pulling", "image", ev.Image, "service", pl.service, "bytes", cur, "total", total, "percent", percent(cur, total))
		}
	case provision.EventPulled, provision.EventFailed:
		pl := p.images[ev.Image]
		if pl == nil || !pl.end.IsZero() {
			return
		}
		pl.end = now
		if ev.Kind == provision.EventFailed {
			pl.status = "failed"
		}
	default:
		return
	}
	if !p.console.tty {
		return
	}
	if p.allEnded() {
		// Leave the final lines on screen; later log lines go below.
		p.console.SetStatus(p.lines(now))
		p.console.Finish()
		p.order, p.images = nil, map[string]*pull{}
		return
	}
	if ev.Kind != provision.EventPullProgress || now.Sub(p.lastTTY) >= ttyEvery {
		p.lastTTY = now
		p.console.SetStatus(p.lines(now))
	}
}

func (p *pulls) allEnded() bool {
	for _, pl := range p.images {
		if pl.end.IsZero() {
			return false
		}
	}
	return len(p.images) > 0
}

// lines renders one line per image.
func (p *pulls) lines(now time.Time) []string {
	out := make([]string, 0, len(p.order))
	for _, ref := range p.order {
		out = append(out, p.images[ref].line(ref, now))
	}
	return out
}

// done leaves the final lines of unfinished pulls on a terminal (a
// provision that failed or was cancelled mid-pull).
func (p *pulls) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.console.tty && len(p.order) > 0 {
		p.console.SetStatus(p.lines(p.now()))
		p.console.Finish()
	}
}

func (pl *pull) update(pp runtime.PullProgress) {
	key := pp.Layer
	if key == "" {
		key = "-"
	}
	st := strings.ToLower(pp.Status)
	pl.status = pp.Status
	cur := pl.layers[key]
	switch {
	case strings.Contains(st, "download") && !strings.Contains(st, "complete") && pp.Total > 0:
		cur = [2]int64{pp.Current, pp.Total}
	case strings.Contains(st, "complete") || strings.Contains(st, "already exists"):
		if cur[1] > 0 {
			cur[0] = cur[1]
		}
	case pp.Total > 0 && !strings.Contains(st, "extract"):
		cur = [2]int64{pp.Current, pp.Total}
	default:
		return
	}
	pl.layers[key] = cur
}

func (pl *pull) bytes() (cur, total int64) {
	for _, l := range pl.layers {
		cur += l[0]
		total += l[1]
	}
	return cur, total
}

func (pl *pull) line(ref string, now time.Time) string {
	cur, total := pl.bytes()
	switch {
	case !pl.end.IsZero() && pl.status == "failed":
		return fmt.Sprintf("pull %s: failed after %s", ref, pl.end.Sub(pl.start).Round(100*time.Millisecond))
	case !pl.end.IsZero():
		return fmt.Sprintf("pulled %s: %s in %s", ref, humanBytes(total), pl.end.Sub(pl.start).Round(100*time.Millisecond))
	case total > 0:
		return fmt.Sprintf("pulling %s: %3d%% %s / %s", ref, percent(cur, total), humanBytes(cur), humanBytes(total))
	default:
		s := fmt.Sprintf("pulling %s: %s", ref, now.Sub(pl.start).Round(time.Second))
		if pl.status != "" {
			s += " " + oneLine(pl.status)
		}
		return s
	}
}

func percent(cur, total int64) int {
	if total <= 0 {
		return 0
	}
	p := int(cur * 100 / total)
	return min(max(p, 0), 100)
}

// humanBytes renders 12.3 MB (decimal units, as registries report sizes).
func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
