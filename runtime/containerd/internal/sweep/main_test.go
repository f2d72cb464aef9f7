package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Kubernetes test cluster's down (hack/env/kubernetes.sh) sweeps its pod
// network with -pool and -bridge: the owner they make takes that network's
// rules and bridge, and leaves the adapter's.
func TestNetworkOwnerOfAnotherNetwork(t *testing.T) {
	o, err := networkOwner("10.244.0.0/24", "sbxk8s0", "1c59a8b5, 0b619c57")
	require.NoError(t, err)
	assert.Equal(t, []string{"1c59a8b5", "0b619c57"}, o.ids)
	for _, tc := range []struct {
		name string
		line string
		want bool
	}{
		{"APodAddress", `-A CNI-FORWARD -s 10.244.0.5/32 -j ACCEPT`, true},
		{"ThePodNetwork", `-A CNI-63152cdc0ec9c4d509399049 -d 10.244.0.0/24 -j ACCEPT`, true},
		{"TheBridge", `-A FORWARD -i sbxk8s0 -j ACCEPT`, true},
		{"ALeftoverSandboxsMasquerade", `-A CNI-6315 ! -d 224.0.0.0/4 -m comment --comment "name: \"sbxk8s\" id: \"1c59a8b5\"" -j MASQUERADE`, true},
		{"TheAdaptersPool", `-A CNI-FORWARD -s 10.213.0.100/32 -j ACCEPT`, false},
		{"AnAdapterBridge", `-A FORWARD -i sbx-29526a3c -j ACCEPT`, false},
		{"AnotherBridgeOfTheSamePrefix", `-A FORWARD -i sbxk8s1 -j ACCEPT`, false},
		{"TheNextNetwork", `-A CNI-FORWARD -s 10.244.1.5/32 -j ACCEPT`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, err := splitRule(tc.line)
			require.NoError(t, err)
			assert.Equal(t, tc.want, o.owns(rule{chain: args[1], args: args[2:]}))
		})
	}
}

func TestNetworkOwnerFlags(t *testing.T) {
	for _, tc := range []struct {
		name, pool, bridge string
		wantErr            string
	}{
		{"NeitherIsTheAdapters", "", "", ""},
		{"PoolWithoutBridge", "10.244.0.0/24", "", "-pool and -bridge go together"},
		{"BridgeWithoutPool", "", "sbxk8s0", "-pool and -bridge go together"},
		{"NotACIDR", "10.244.0.0", "sbxk8s0", "-pool: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := networkOwner(tc.pool, tc.bridge, "")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, testOwner().pool, o.pool)
			assert.True(t, o.ownsBridge("sbx-29526a3c"))
		})
	}
}
