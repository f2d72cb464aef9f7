package containerd

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLabelFilter(t *testing.T) {
	cases := []struct {
		name     string
		selector map[string]string
		want     string
	}{
		{name: "none", want: ""},
		{name: "one", selector: map[string]string{"a": "b"}, want: `labels."a"=="b"`},
		{name: "AND in key order", selector: map[string]string{"z.k": "1", "a/k": "2"}, want: `labels."a/k"=="2",labels."z.k"=="1"`},
		{name: "quotes and spaces are escaped", selector: map[string]string{"k": `a "b" c`}, want: `labels."k"=="a \"b\" c"`},
		{name: "empty values are left to the caller", selector: map[string]string{"k": "", "a": "b"}, want: `labels."a"=="b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, labelFilter(tc.selector))
		})
	}
}
