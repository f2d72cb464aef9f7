package engines

// Warmer is implemented by an engine whose image initialises its data on
// first start (initdb and a temporary server, for postgres), so that a
// sandbox can start from a template of that data instead: the provisioner
// builds the template once per base image (it runs the image as a cold
// sandbox would, stops the server cleanly, captures each tmpfs path of
// Spec with tar and appends the tars to the image as one layer) and starts
// warm sandboxes from it with WarmEntrypoint. An engine without it always
// starts cold.
type Warmer interface {
	// WarmKey names the recipe below: a template is reused only for the
	// same base image and the same key (and the same container env,
	// command and tmpfs paths). Change it whenever the recipe changes.
	WarmKey() string
	// TemplateEntrypoint replaces the image's entrypoint in the template
	// container: it runs the image's own start (the cold command follows
	// as arguments) and keeps the container alive once the server stops,
	// so that its data can be captured.
	TemplateEntrypoint() []string
	// StopServer is the exec, run in the ready template container as
	// StopUser, that stops the server cleanly and returns once it is down.
	StopServer() (argv []string, user string)
	// WarmEntrypoint replaces the image's entrypoint in a sandbox started
	// from a template (the cold command follows as arguments). It unpacks
	// each tar onto its tmpfs path, gives the sandbox the credentials of
	// its env before the server listens on any address (the template's
	// own never work), then runs the server as a cold start does. It
	// exits with a status from 1 to 127 when the template cannot be used.
	WarmEntrypoint(files []WarmFile) []string
}

// WarmFile is one captured tmpfs path of a template and the file inside
// the template image that holds its tar.
type WarmFile struct {
	Path string
	File string
}
