// Package adapterkit is the plumbing that sandboxer's adapters share: the
// scaffolding of their one translation point (Translator), the Run that
// retries a start whose ephemeral host port was taken (Runner), the
// removal of a half-made container (Discard), and the settings every
// adapter's New reads (Settings).
//
// It holds no rule of the port (those are in package runtime, e.g.
// runtime.RunSpec.Normalize) and no decision of a backend: each adapter
// still classifies its own backend's errors in its own errors.go, and
// decides for itself when a taken port may be retried. What is here is what
// would otherwise be copied from one adapter to the next.
//
// An adapter builds its errors one way. Inside its Runtime's methods every
// error leaves through the Runtime's one translation point, r.wrap(op,
// object, err) (Translator.Translate, which classifies and redacts the
// endpoint); an error of the adapter's own checks goes in as WithKind(kind,
// ...), with a nil kind for one that has none. Only code that runs before a
// Runtime exists (New, option parsing) builds its error with Fail or
// ConnectError; no adapter calls runtime.NewError itself.
package adapterkit
