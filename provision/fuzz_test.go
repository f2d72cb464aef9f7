package provision_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
)

// containerNameRE is what Docker, Podman and containerd all accept.
var containerNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// FuzzValidate: whatever the owner id and service list, Validate never
// panics; what it accepts yields valid container names and known, distinct
// services; what it rejects is ErrInvalid naming the offending value.
// The seed corpus is in testdata/fuzz/FuzzValidate.
func FuzzValidate(f *testing.F) {
	f.Add("42", "postgres,redis,mongo")
	f.Add("", "postgres")
	f.Fuzz(func(t *testing.T, owner, list string) {
		services := strings.Split(list, ",")
		if list == "" {
			services = nil
		}
		engs, err := provision.Validate(engines.Default, owner, services)
		if err != nil {
			if !errors.Is(err, provision.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			var ve *provision.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v is not a *ValidationError", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", ve.Value)) {
				t.Fatalf("error %q does not name the value %q", err, ve.Value)
			}
			if ve.Field != "owner id" && !strings.Contains(err.Error(), validServices) {
				t.Fatalf("error %q does not list the valid services", err)
			}
			return
		}
		if len(engs) != len(services) {
			t.Fatalf("accepted %d services, got %d engines", len(services), len(engs))
		}
		seen := map[string]bool{}
		for _, e := range engs {
			s := e.Spec()
			if seen[s.Name] {
				t.Fatalf("service %s twice", s.Name)
			}
			seen[s.Name] = true
			name := provision.ContainerName(labels.DefaultPrefix, s.Short, owner)
			if !containerNameRE.MatchString(name) || len(name) > 128 {
				t.Fatalf("accepted owner %q gives invalid container name %q", owner, name)
			}
		}
	})
}
