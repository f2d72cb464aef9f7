package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestJanitorMetricsAddrIsCheckedBeforeAnyRuntimeContact: a metrics
// address off loopback is refused as a usage error (exit 2) unless
// --metrics-public allows it, before any runtime is contacted (the
// hermetic environment has none: reaching one would exit 3).
func TestJanitorMetricsAddrIsCheckedBeforeAnyRuntimeContact(t *testing.T) {
	code, _, errOut := mainInProcess(t, nil, "janitor", "--metrics-addr", "0.0.0.0:9464")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "not a loopback address")
	code, _, errOut = mainInProcess(t, nil, "janitor", "--metrics-addr", "127.0.0.1:notaport")
	assert.Equal(t, 2, code, errOut)
	code, _, errOut = mainInProcess(t, nil, "janitor", "--metrics-addr", "0.0.0.0:9464", "--metrics-public")
	assert.Equal(t, 3, code, "allowed: it goes on to the runtime, which is unavailable here: %s", errOut)
}
