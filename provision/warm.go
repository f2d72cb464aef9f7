package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/ids"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/dockerarchive"
)

// Warm says whether sandboxes of engines that can start warm
// (engines.Warmer) start from a template of their initialised data.
type Warm string

// Warm modes.
const (
	// WarmAuto (the default) starts warm where the engine can, building
	// the template on first use, and cold wherever warm start is not to
	// be had (see Options.Warm).
	WarmAuto Warm = "auto"
	// WarmOff always starts cold, and never looks for a template.
	WarmOff Warm = "off"
)

// WarmEnv is the environment variable the CLI reads Options.Warm from.
const WarmEnv = "SANDBOXER_WARM"

// ParseWarm reads a Warm mode ("" is WarmAuto).
func ParseWarm(s string) (Warm, error) {
	switch w := Warm(strings.ToLower(strings.TrimSpace(s))); w {
	case "", WarmAuto:
		return WarmAuto, nil
	case WarmOff:
		return WarmOff, nil
	default:
		return "", invalid("warm", s, "want auto or off")
	}
}

const (
	// TemplateRepo is where templates are tagged:
	// localhost/sandboxer-warm/<engine>:<key>.
	TemplateRepo = "localhost/sandboxer-warm/"
	// templateBuildTimeout bounds one template build (run, ready, stop,
	// capture, save, rewrite, load), whoever waits for it.
	templateBuildTimeout = 5 * time.Minute
	// templateLabel and the others label a template image.
	templateLabel        = "sandboxer.warm.template"
	templateBaseLabel    = "sandboxer.warm.base"
	templateBaseIDLabel  = "sandboxer.warm.base-id"
	templateEngineLabel  = "sandboxer.warm.engine"
	templateCaptureLabel = "sandboxer.warm.paths"
	// buildRetry is how long a provisioner starts cold without trying
	// again after a template build failed: a build that cannot work (an
	// image that does not keep the official contract) is not paid for by
	// every provision, and one that failed by chance (a loaded host) is
	// tried again later.
	buildRetry = 10 * time.Minute
	// templateDir is where a template image keeps its tars.
	templateDir = "/sandboxer-warm"
)

// builds makes concurrent builds of one template in this process one
// build; a file lock does the same across processes.
var builds singleflight.Group

// Template is a warm template as the provisioner makes and finds it.
type Template struct {
	// Engine is the engine's name.
	Engine string
	// Base is the base image ref, BaseID its ID (config digest).
	Base, BaseID string
	// Ref is the template image's tag.
	Ref string
	// Built reports whether this call built it (false: it was there).
	Built bool
	// Present reports whether the template is in the image store (what
	// Templates found; EnsureTemplate returns a present one).
	Present bool
	// Elapsed is how long finding or building it took.
	Elapsed time.Duration
}

// warmer is s's engine as a Warmer, when warm start is on and it is one.
func (p *Provisioner) warmer(s *service) (engines.Warmer, bool) {
	if p.opts.Warm == WarmOff || p.images == nil {
		return nil, false
	}
	w, ok := s.engine.(engines.Warmer)
	return w, ok
}

// templateCred is what a template is initialised with: the default user
// and database and a password nobody keeps (a warm sandbox gets its own
// before it listens).
func templateCred() (engines.Credentials, error) { return engines.NewCredentials() }

// templateRef is the tag of the template of s's image with ID baseID:
// one per base image and recipe (the engine's key, the env and command of
// its container without the password, the tmpfs paths and their options).
func (p *Provisioner) templateRef(s *service, w engines.Warmer, baseID string) string {
	noPassword := engines.Credentials{User: engines.DefaultUser, Database: engines.DefaultDatabase}
	spec := p.runSpec(&call{}, &service{engine: s.engine, spec: s.spec, image: s.image, img: s.img, cred: noPassword})
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", baseID, w.WarmKey())
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		fmt.Fprintf(h, "env %s=%s\n", k, spec.Env[k])
	}
	fmt.Fprintf(h, "cmd %q\n", spec.Command)
	for _, k := range slices.Sorted(maps.Keys(spec.Tmpfs)) {
		fmt.Fprintf(h, "tmpfs %s %s\n", k, spec.Tmpfs[k])
	}
	return TemplateRepo + s.spec.Name + ":" + hex.EncodeToString(h.Sum(nil))[:16]
}

// EnsureTemplate finds or builds the template of service's image and
// returns it: what `sandboxer warm` and a first warm provision do. An
// engine that cannot start warm is an ErrInvalid error.
func (p *Provisioner) EnsureTemplate(ctx context.Context, name string) (Template, error) {
	s, w, err := p.warmService(name)
	if err != nil {
		return Template{}, err
	}
	c := &call{id: ids.Hex(8), owner: p.opts.OwnerName("warm-" + ids.Hex(4))}
	if err := p.ensureImage(ctx, c, s); err != nil {
		return Template{}, err
	}
	if err := p.readImage(ctx, s); err != nil {
		return Template{}, err
	}
	return p.template(ctx, c, s, w)
}

// warmService is the service of the engine called name, when it can start
// warm. A runtime without an image store keeps no template: an
// ErrUnsupported error.
func (p *Provisioner) warmService(name string) (*service, engines.Warmer, error) {
	e, ok := p.opts.Registry.Lookup(name)
	if !ok {
		return nil, nil, invalid("service", name, "unknown service; valid services: "+strings.Join(p.opts.Registry.Names(), ", "))
	}
	w, ok := e.(engines.Warmer)
	if !ok {
		return nil, nil, invalid("service", name, "starts cold: its engine has no warm start")
	}
	if p.images == nil {
		return nil, nil, fmt.Errorf("templates of %s: %s has no image store to keep one in (its nodes pull at run): %w", name, p.rt.Name(), runtime.ErrUnsupported)
	}
	return &service{engine: e, spec: e.Spec(), image: p.opts.image(e.Spec())}, w, nil
}

// WarmServices are the registered engines that can start warm.
func (p *Provisioner) WarmServices() []string {
	var out []string
	for _, e := range p.opts.Registry.All() {
		if _, ok := e.(engines.Warmer); ok {
			out = append(out, e.Spec().Name)
		}
	}
	return out
}

// LookupTemplate reports the template of service name's image as it
// stands: its ref, and whether it is present. A base image that is not
// present has no template to speak of (Ref "").
func (p *Provisioner) LookupTemplate(ctx context.Context, name string) (Template, error) {
	s, w, err := p.warmService(name)
	if err != nil {
		return Template{}, err
	}
	t := Template{Engine: s.spec.Name, Base: s.image}
	ok, err := p.imageExists(ctx, s.image)
	if err != nil || !ok {
		return t, err
	}
	if t.BaseID, err = p.imageID(ctx, s.image); err != nil {
		return t, err
	}
	if err := p.readImage(ctx, s); err != nil {
		return t, err
	}
	t.Ref = p.templateRef(s, w, t.BaseID)
	t.Present, err = p.imageExists(ctx, t.Ref)
	return t, err
}

// imageExists is ImageExists within Options.CallTimeout.
func (p *Provisioner) imageExists(ctx context.Context, ref string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	return p.images.ImageExists(ctx, ref)
}

// imageID is ImageID within Options.CallTimeout.
func (p *Provisioner) imageID(ctx context.Context, ref string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	return p.images.ImageID(ctx, ref)
}

// RemoveTemplate removes the template of service name's image, if there
// is one; the next warm provision builds it again.
func (p *Provisioner) RemoveTemplate(ctx context.Context, name string) (Template, error) {
	t, err := p.LookupTemplate(ctx, name)
	if err != nil || !t.Present {
		return t, err
	}
	rctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	if err := p.images.RemoveImage(rctx, t.Ref); err != nil {
		return t, err
	}
	t.Present = false
	return t, nil
}

// template finds the template of s's image or builds it, once however
// many provisions ask at the same time (in this process: singleflight;
// across processes: a file lock), and returns its ref.
func (p *Provisioner) template(ctx context.Context, c *call, s *service, w engines.Warmer) (Template, error) {
	start := time.Now()
	baseID, err := p.imageID(ctx, s.image)
	if err != nil {
		return Template{}, err
	}
	t := Template{Engine: s.spec.Name, Base: s.image, BaseID: baseID, Ref: p.templateRef(s, w, baseID)}
	ok, err := p.imageExists(ctx, t.Ref)
	if err != nil {
		return Template{}, err
	}
	if ok {
		t.Present, t.Elapsed = true, time.Since(start)
		return t, nil
	}
	if at, ok := p.buildFailed.Load(t.Ref); ok && time.Since(at.(time.Time)) < buildRetry {
		return Template{}, fmt.Errorf("the build of %s failed %s ago; tried again after %s", t.Ref, time.Since(at.(time.Time)).Round(time.Second), buildRetry)
	}
	// The build is shared: one caller giving up must not end it for the
	// others, so it runs on its own bounded context. Only the caller whose
	// function ran reports the build as its own (leader is written before
	// the result is sent).
	leader := false
	ch := builds.DoChan(p.rt.Name()+"|"+p.rt.Endpoint()+"|"+t.Ref, func() (any, error) {
		leader = true
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), templateBuildTimeout)
		defer cancel()
		return p.buildLocked(bctx, s, w, t)
	})
	select {
	case <-ctx.Done():
		return Template{}, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			p.buildFailed.Store(t.Ref, time.Now())
			return Template{}, res.Err
		}
		p.buildFailed.Delete(t.Ref)
		t.Built, t.Present = leader && res.Val.(bool), true
		t.Elapsed = time.Since(start)
		return t, nil
	}
}

// buildLocked builds t under a file lock of the host, unless another
// process built it while this one waited for the lock. It reports whether
// it built.
func (p *Provisioner) buildLocked(ctx context.Context, s *service, w engines.Warmer, t Template) (bool, error) {
	unlock, err := lockFile(ctx, filepath.Join(os.TempDir(), "sandboxer-warm-"+shortHash(p.rt.Name()+"|"+p.rt.Endpoint()+"|"+t.Ref)+".lock"))
	if err != nil {
		return false, err
	}
	defer unlock()
	ok, err := p.imageExists(ctx, t.Ref)
	if err != nil || ok {
		return false, err
	}
	if err := p.build(ctx, s, w, t); err != nil {
		return false, fmt.Errorf("build warm template %s of %s: %w", t.Ref, t.Base, err)
	}
	return true, nil
}

// build runs s's image as a cold sandbox would (under the template
// entrypoint, which outlives the server), waits until it is ready, stops
// the server cleanly, captures every tmpfs path of the spec with tar,
// removes the container, and loads the base image plus one layer of those
// tars under t.Ref.
func (p *Provisioner) build(ctx context.Context, s *service, w engines.Warmer, t Template) (err error) {
	cred, err := templateCred()
	if err != nil {
		return err
	}
	// The template's password is nobody's, but is kept out of messages
	// like any other.
	defer func() { err = redactor{cred.Password}.Error(err) }()
	ts := &service{engine: s.engine, spec: s.spec, cred: cred, image: s.image, img: s.img,
		name: p.opts.LabelPrefix + "-warm-" + s.spec.Short + "-" + ids.Hex(4)}
	spec, err := p.buildSpec(ts, w)
	if err != nil {
		return err
	}

	runCtx, cancelRun := context.WithTimeout(context.WithoutCancel(ctx), cleanupTime)
	ctr, err := p.rt.Run(runCtx, spec)
	cancelRun()
	if err != nil {
		return err
	}
	defer func() {
		if _, err := runtime.Destroy(ctx, p.rt, ctr, p.opts.CallTimeout); err != nil && p.opts.Logger != nil {
			p.opts.Logger.Warn("warm template container left behind", "container", ctr.Name, "err", err)
		}
	}()

	readyTimeout := s.spec.ReadyTimeout
	if p.opts.ReadyTimeout > 0 {
		readyTimeout = p.opts.ReadyTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	host, err := p.address(rctx, ctr, spec.Network)
	if err != nil {
		return err
	}
	own := engines.Endpoint{Host: host, Port: s.spec.Port}
	if _, out, err := p.waitReady(ctx, rctx, ctr.ID, s.engine.Probe(own, cred), readyTimeout); err != nil {
		return fmt.Errorf("template container not ready: %w (%s)", err, out)
	}

	argv, user := w.StopServer()
	if err := p.execOK(ctx, ctr.ID, runtime.ExecSpec{Cmd: argv, User: user}); err != nil {
		return fmt.Errorf("stop the server: %w", err)
	}
	var files []dockerarchive.LayerFile
	var paths []string
	for _, path := range slices.Sorted(maps.Keys(spec.Tmpfs)) {
		res, err := p.rt.Exec(ctx, ctr.ID, runtime.ExecSpec{Cmd: []string{"tar", "-C", path, "-cf", "-", "."}})
		if err != nil {
			return fmt.Errorf("capture %s: %w", path, err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("capture %s: tar exit code %d: %s", path, res.ExitCode, combine(runtime.ExecResult{Stderr: res.Stderr, ExitCode: res.ExitCode}))
		}
		files = append(files, dockerarchive.LayerFile{Name: templateFile(path), Body: res.Stdout})
		paths = append(paths, path)
	}
	return p.loadTemplate(ctx, t, files, paths)
}

// buildSpec is the run spec of the template container of a build for ts:
// a cold sandbox's, under the template entrypoint, with no port, and with
// labels of its own. A build belongs to no call and no owner: whichever
// provision triggered it, others wait for it and all use what it makes.
// So it carries neither an owner container nor a call label (no rollback,
// no teardown lists it), and its owner is the building process (the
// lifetime process-owner labels), which the janitor judges like any other
// process owner: it is kept while the build runs, and removed after a
// crash. Without a process identity (no /proc) there is no build.
func (p *Provisioner) buildSpec(ts *service, w engines.Warmer) (runtime.RunSpec, error) {
	proc, err := lifetime.CurrentProcess()
	if err != nil {
		return runtime.RunSpec{}, fmt.Errorf("a template build is owned by the building process: %w", err)
	}
	spec := p.runSpec(&call{}, ts)
	delete(spec.Labels, p.keys.Owner)
	delete(spec.Labels, p.keys.Call)
	maps.Copy(spec.Labels, proc.Labels(p.keys.Prefix))
	spec.Entrypoint = w.TemplateEntrypoint()
	spec.Ports = nil
	return spec, nil
}

// templateFile is the file of a template image that holds the tar of
// tmpfs path.
func templateFile(path string) string {
	return templateDir + "/" + shortHash(path) + ".tar"
}

// warmFiles are the tars of a template for the tmpfs paths of spec.
func warmFiles(spec runtime.RunSpec) []engines.WarmFile {
	var files []engines.WarmFile
	for _, path := range slices.Sorted(maps.Keys(spec.Tmpfs)) {
		files = append(files, engines.WarmFile{Path: path, File: templateFile(path)})
	}
	return files
}

// loadTemplate saves the base image, appends the layer of files and loads
// the result under t.Ref.
func (p *Provisioner) loadTemplate(ctx context.Context, t Template, files []dockerarchive.LayerFile, paths []string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(p.images.SaveImage(ctx, t.Base, pw)) }()
	base, err := dockerarchive.Read(pr)
	_ = pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return fmt.Errorf("save %s: %w", t.Base, err)
	}
	defer base.Close()
	if base.ConfigDigest != t.BaseID {
		return fmt.Errorf("saved %s is image %s, not %s (changed meanwhile)", t.Base, base.ConfigDigest, t.BaseID)
	}
	lbls := map[string]string{
		templateLabel:        "1",
		templateEngineLabel:  t.Engine,
		templateBaseLabel:    t.Base,
		templateBaseIDLabel:  t.BaseID,
		templateCaptureLabel: strings.Join(paths, ":"),
	}
	lr, lw := io.Pipe()
	go func() { lw.CloseWithError(dockerarchive.AppendLayer(lw, base, t.Ref, lbls, files)) }()
	_, err = p.images.LoadImage(ctx, lr)
	_ = lr.CloseWithError(io.ErrClosedPipe)
	return err
}

// execOK runs spec in container and fails unless it exits 0.
func (p *Provisioner) execOK(ctx context.Context, container string, spec runtime.ExecSpec) error {
	res, err := p.rt.Exec(ctx, container, spec)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s: exit code %d: %s", spec.Cmd[0], res.ExitCode, combine(res))
	}
	return nil
}

// lockFile takes an exclusive flock on path, polling until ctx ends, and
// returns its release.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("warm template lock: %w", err)
	}
	delay := pollFirst
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("warm template lock %s: %w", path, err)
		}
		if err := pause(ctx, delay); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("warm template lock %s: %w", path, err)
		}
		delay = min(delay*3/2, pollMax*5)
	}
}

// warmSpec turns spec, s's cold run spec, into a warm one when s's
// template can be had (found, or built now), and records the template in
// s. When it cannot, spec is returned as it is and an EventWarmFallback
// says why.
func (p *Provisioner) warmSpec(ctx context.Context, c *call, s *service, w engines.Warmer, spec runtime.RunSpec) runtime.RunSpec {
	t, err := p.template(ctx, c, s, w)
	if err != nil {
		if ctx.Err() == nil {
			p.emit(ctx, p.event(EventWarmFallback, c, s, func(ev *Event) { ev.Err = c.redact.Error(fmt.Errorf("no warm template: %w", err)) }))
		}
		return spec
	}
	if t.Built {
		p.emit(ctx, p.event(EventTemplateBuilt, c, s, func(ev *Event) { ev.Template, ev.Elapsed = t.Ref, t.Elapsed }))
	}
	s.template = t.Ref
	spec.Image = t.Ref
	spec.Entrypoint = w.WarmEntrypoint(warmFiles(spec))
	return spec
}

// canFallBack reports whether a warm start that failed with err may be
// tried again cold: not when the caller gave up, the runtime is not
// there, the name is taken, or the runtime published the port beyond
// loopback (its doing, not the template's: a cold start would be
// published the same way).
func canFallBack(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, runtime.ErrUnavailable) && !errors.Is(err, ErrConflict) && !errors.Is(err, runtime.ErrExposed)
}

// abandonWarm destroys the warm sandbox that failed with cause, and
// removes its template when the sandbox exited on its own with a status
// from 1 to 127 (the template is what failed: it is built again on next
// use). It leaves s ready for a cold start under the same name.
func (p *Provisioner) abandonWarm(ctx context.Context, c *call, s *service, cause error) error {
	tmpl := s.template
	p.emit(ctx, p.event(EventWarmFallback, c, s, func(ev *Event) {
		ev.Template, ev.Err = tmpl, c.redact.Error(fmt.Errorf("warm start failed, starting cold: %w", cause))
	}))
	blame := false
	if s.created.ID != "" {
		ictx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
		got, err := p.rt.Inspect(ictx, s.created.ID)
		cancel()
		blame = err == nil && got.State == runtime.StateExited && got.ExitCode >= 1 && got.ExitCode <= 127
		if _, err := runtime.Destroy(ctx, p.rt, s.created, p.opts.CallTimeout); err != nil {
			return fmt.Errorf("remove the failed warm sandbox: %w", err)
		}
	}
	s.created, s.template = runtime.Container{}, ""
	if blame {
		rctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
		err := p.images.RemoveImage(rctx, tmpl)
		cancel()
		if err != nil {
			return fmt.Errorf("remove the failed warm template %s: %w", tmpl, err)
		}
		p.emit(ctx, p.event(EventTemplateRemoved, c, s, func(ev *Event) { ev.Template = tmpl }))
	}
	return nil
}

// shortHash is 16 hex digits of the sha256 of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}
