package testkit

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TmpfsBytes is the sum of the sizes of tmpfs, whose options are each
// "size=<bytes>" (what an engine's container asks for): the memory its
// tmpfs may hold at most.
func TmpfsBytes(t testing.TB, tmpfs map[string]string) int64 {
	t.Helper()
	var sum int64
	for path, o := range tmpfs {
		n, err := strconv.ParseInt(strings.TrimPrefix(o, "size="), 10, 64)
		require.NoError(t, err, "tmpfs %s: %q", path, o)
		sum += n
	}
	return sum
}
