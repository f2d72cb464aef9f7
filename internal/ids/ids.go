// Package ids makes the random identifiers sandboxer uses in names and
// labels (a provision's call label, `run`'s owner id, test and bench
// prefixes): one rule, in one place.
package ids

import (
	"crypto/rand"
	"encoding/hex"
)

// Hex returns n random bytes from crypto/rand as 2n lower-case hex digits.
// crypto/rand's Read never fails (Go >= 1.24: it crashes the program
// instead of returning an error).
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
