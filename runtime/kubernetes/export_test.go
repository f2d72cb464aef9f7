package kubernetes

// Accesses is every permission Diagnose checks, as "verb resource" or
// "verb resource/subresource", for the tests that hold it against the
// README's Role.
func Accesses() []string {
	out := make([]string, 0, len(accesses))
	for _, a := range accesses {
		out = append(out, a.verb+" "+a.resource())
	}
	return out
}
