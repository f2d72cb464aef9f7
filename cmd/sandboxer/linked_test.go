package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/roboco/sandboxer/runtime/detect"
)

// TestCLILinksEveryRuntime: the CLI (this package's program) links every
// adapter, so each runtime detection may find is one it can use.
func TestCLILinksEveryRuntime(t *testing.T) {
	assert.Equal(t, detect.Choosable(), detect.Linked())
}
