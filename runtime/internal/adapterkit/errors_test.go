package adapterkit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// errRefused and errGone stand for a backend's "cannot connect" and "no
// such thing".
var (
	errRefused = errors.New("connection refused")
	errGone    = errors.New("no such thing")
)

// testTranslator classifies errGone as not found and errRefused as
// unreachable, as an adapter would its backend's errors.
func testTranslator() Translator {
	return Translator{
		Runtime:     "fake",
		Endpoint:    "unix:///fake.sock",
		Unreachable: func(err error) bool { return errors.Is(err, errRefused) },
		Classify: func(_ string, err error) error {
			if errors.Is(err, errGone) {
				return runtime.ErrNotFound
			}
			return nil
		},
	}
}

func TestTranslatorKind(t *testing.T) {
	cases := []struct {
		name string
		op   string
		err  error
		want error
	}{
		{name: "BackendDecides", op: runtime.OpInspect, err: errGone, want: runtime.ErrNotFound},
		{name: "UnclassifiedHasNoKind", op: runtime.OpInspect, err: errors.New("boom")},
		{name: "UnreachableIsUnavailable", op: runtime.OpInspect, err: fmt.Errorf("dial: %w", errRefused), want: runtime.ErrUnavailable},
		{name: "UnreachableOnPullIsUnavailable", op: runtime.OpPull, err: errRefused, want: runtime.ErrUnavailable},
		{name: "AnyOtherPullFailureIsImageNotFound", op: runtime.OpPull, err: errGone, want: runtime.ErrImageNotFound},
		{name: "CanceledHasNoKind", op: runtime.OpPull, err: fmt.Errorf("pull: %w", context.Canceled)},
		{name: "DeadlineHasNoKind", op: runtime.OpInspect, err: context.DeadlineExceeded},
		{name: "CanceledBeatsUnreachable", op: runtime.OpList, err: errors.Join(context.Canceled, errRefused)},
		{name: "AdapterKindIsKept", op: runtime.OpRun, err: WithKind(runtime.ErrUnsupported, "no %s controller", "pids"), want: runtime.ErrUnsupported},
		{name: "AdapterKindBeatsCanceled", op: runtime.OpRun, err: WithKind(runtime.ErrUnsupported, "gave up: %w", context.Canceled), want: runtime.ErrUnsupported},
		{name: "AdapterNoKindIsKeptOnPull", op: runtime.OpPull, err: WithKind(nil, "no reference given")},
		{name: "AdapterNoKindIsNotClassified", op: runtime.OpInspect, err: WithKind(nil, "read: %w", errGone)},
	}
	tr := testTranslator()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tr.Kind(tc.op, tc.err))
		})
	}
}

func TestTranslatorTranslate(t *testing.T) {
	tr := testTranslator()
	t.Run("NamesRuntimeVerbAndObject", func(t *testing.T) {
		err := tr.Translate(runtime.OpInspect, "box", errGone)
		var re *runtime.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, runtime.Error{Runtime: "fake", Op: runtime.OpInspect, Object: "box", Kind: runtime.ErrNotFound, Err: errGone}, *re)
		assert.ErrorIs(t, err, errGone, "the cause stays reachable")
		assert.Equal(t, "fake: inspect box: not found: no such thing", err.Error())
	})
	t.Run("AdapterNoKind", func(t *testing.T) {
		err := tr.Translate(runtime.OpExec, "box", WithKind(nil, "no command given: %w", errGone))
		var re *runtime.Error
		require.ErrorAs(t, err, &re)
		assert.Nil(t, re.Kind)
		assert.ErrorIs(t, err, errGone, "a cause given with %w stays reachable")
		assert.NotErrorIs(t, err, runtime.ErrNotFound)
		assert.Equal(t, "fake: exec box: no command given: no such thing", err.Error())
	})
	t.Run("UnavailableNamesTheEndpoint", func(t *testing.T) {
		err := tr.Translate(runtime.OpList, "", errRefused)
		assert.ErrorIs(t, err, runtime.ErrUnavailable)
		assert.ErrorIs(t, err, errRefused)
		assert.Equal(t, "fake: list: runtime unavailable: endpoint unix:///fake.sock: connection refused", err.Error())
	})
	t.Run("EndpointNamedOnce", func(t *testing.T) {
		err := tr.Translate(runtime.OpList, "", fmt.Errorf("dial unix:///fake.sock: %w", errRefused))
		assert.Equal(t, "fake: list: runtime unavailable: dial unix:///fake.sock: connection refused", err.Error())
	})
	t.Run("AlreadyTranslatedIsKept", func(t *testing.T) {
		orig := runtime.NewError("fake", runtime.OpRun, "box", runtime.ErrUnsupported, errors.New("limits"))
		assert.Same(t, orig, tr.Translate(runtime.OpInspect, "other", orig))
		wrapped := fmt.Errorf("again: %w", orig)
		assert.Equal(t, wrapped, tr.Translate(runtime.OpInspect, "other", wrapped), "wrapped, it is returned as it is")
	})
	t.Run("AnotherRuntimesErrorIsTranslated", func(t *testing.T) {
		other := runtime.NewError("other", runtime.OpRun, "box", runtime.ErrNotFound, nil)
		var re *runtime.Error
		require.ErrorAs(t, tr.Translate(runtime.OpRun, "box", other), &re)
		assert.Equal(t, "fake", re.Runtime)
	})
	t.Run("NilStaysNil", func(t *testing.T) {
		assert.NoError(t, tr.Translate(runtime.OpInspect, "box", nil))
	})
	t.Run("CauseRewritesTheKeptCauseOnly", func(t *testing.T) {
		tr := testTranslator()
		tr.Cause = func(err error) error { return fmt.Errorf("%w (HTTP 404)", err) }
		err := tr.Translate(runtime.OpInspect, "box", errGone)
		assert.Equal(t, "fake: inspect box: not found: no such thing (HTTP 404)", err.Error())
		assert.ErrorIs(t, err, errGone)
		orig := runtime.NewError("fake", runtime.OpRun, "box", nil, errGone)
		assert.Same(t, orig, tr.Translate(runtime.OpInspect, "box", orig), "an error already translated is not rewritten")
	})
}

func TestCreates(t *testing.T) {
	named := map[string]bool{runtime.OpRun: true, runtime.OpCreate: true, runtime.OpCreateNetwork: true}
	containers := map[string]bool{runtime.OpRun: true, runtime.OpCreate: true}
	for _, op := range []string{
		runtime.OpConnect, runtime.OpVersion, runtime.OpImageExists, runtime.OpPull, runtime.OpRun, runtime.OpCreate,
		runtime.OpInspect, runtime.OpExec, runtime.OpStop, runtime.OpKill, runtime.OpRemove, runtime.OpList,
		runtime.OpSnapshot, runtime.OpCreateNetwork, runtime.OpRemoveNetwork,
	} {
		assert.Equal(t, named[op], CreatesNamed(op), "CreatesNamed(%q)", op)
		assert.Equal(t, containers[op], CreatesContainer(op), "CreatesContainer(%q)", op)
	}
}
