package ids_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/roboco/sandboxer/internal/ids"
)

func TestHex(t *testing.T) {
	for _, n := range []int{0, 1, 4, 16} {
		assert.Regexp(t, regexp.MustCompile("^[0-9a-f]*$"), ids.Hex(n))
		assert.Len(t, ids.Hex(n), 2*n)
	}
	assert.NotEqual(t, ids.Hex(16), ids.Hex(16), "random")
}
