package runtime

// MatchLabels reports whether labels contain every key=value pair of
// selector. Adapters whose backend cannot filter exactly use it to
// post-filter, so that List means the same on every backend.
func MatchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		got, ok := labels[k]
		if !ok || got != v {
			return false
		}
	}
	return true
}
