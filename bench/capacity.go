package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/provision"

	// Every engine, and its test kit's fill.
	_ "github.com/roboco/sandboxer/engines/all/alltest"
)

// capacityChunk is the size of one record the capacity fill writes (1 kB
// rows, keys, documents).
const capacityChunk = 1000

// FigCapacity is the name of an engine's capacity figure, at limit (the
// memory limit its sandbox runs with: the engine's own default, 1 GiB for
// mongo, else 512 MiB).
func FigCapacity(engine string, limit int64) string {
	return fmt.Sprintf("%s: data held before full, %d MiB limit", engine, limit>>20)
}

// memory is the memory limit the bench's sandboxes and baseline runs of
// engine get: the provisioner's default for it (provision.Options.Memory).
func (s *Suite) memory(engine string) int64 {
	e, _ := s.Registry.Lookup(engine)
	return provision.Options{}.Memory(e.Spec())
}

// capacity provisions each engine once at the default memory limit and
// fills it through its real client (its test kit's enginetest.Filler) with 1 kB records
// until the server answers with its own "full" error; the figure is the
// payload it accepted, and its note the error. One sample per engine and
// run: it measures the budget, not a speed, and filling costs seconds.
func (s *Suite) capacity(ctx context.Context, p *provision.Provisioner) {
	for _, e := range s.Registry.All() {
		name := e.Spec().Name
		kit, err := enginetest.KitOf(e)
		if err == nil {
			err = s.fillOnce(ctx, p, name, kit)
		}
		if err != nil {
			s.fail(FigCapacity(name, s.memory(name)), err)
		}
	}
}

func (s *Suite) fillOnce(ctx context.Context, p *provision.Provisioner, name string, f enginetest.Filler) error {
	owner := "cap-" + name
	defer s.teardown(ctx, p, owner)
	sb, err := p.Provision(ctx, owner, []string{name})
	if err != nil {
		return err
	}
	url, err := s.urlOf(sb, sb.Containers[0])
	if err != nil {
		return err
	}
	fig := FigCapacity(name, s.memory(name))
	res, err := f.Fill(ctx, url, capacityChunk, 4*s.memory(name))
	if err != nil {
		return errors.New(redact(err.Error(), url))
	}
	if res.Full == nil {
		return fmt.Errorf("%d MiB written without a full error", res.Bytes>>20)
	}
	s.sample(fig, float64(res.Bytes)/(1<<20))
	s.note(fig, fmt.Sprintf("%d records of %d B, then: %.80s", res.Records, capacityChunk, res.Full))
	return nil
}
