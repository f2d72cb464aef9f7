package testkit

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCgroupValues(t *testing.T) {
	cases := []struct {
		name          string
		quota, period string
		want          float64
	}{
		{name: "one cpu", quota: "100000", period: "100000", want: 1},
		{name: "half a cpu", quota: "50000", period: "100000", want: 0.5},
		{name: "v1 no quota", quota: "-1", period: "100000", want: -1},
		{name: "v2 no quota", quota: "max", period: "100000", want: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, cpuRatio(t, tc.quota, tc.period), 1e-9)
		})
	}
	assert.Equal(t, int64(-1), parseCgroupValue(t, "max"))
	assert.Equal(t, int64(67108864), parseCgroupValue(t, "67108864"))
	assert.Equal(t, int64(math.MaxInt64&^0xfff), parseCgroupValue(t, "9223372036854771712"))
}
