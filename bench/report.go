// Package bench measures sandboxer end to end on a real runtime and
// renders the figures the project publishes: provisioning next to the
// physical floor (the runtime's own API run of the same image and flags,
// then a real client login polled every 20 ms), parallel and sequential
// trios, teardown, the image-present check, janitor sweeps and 20 owners
// provisioning at once.
//
// Every figure is the median, with min and max, of repeated samples, and a
// figure that has a baseline shows its ratio to that baseline as measured
// in the same run: absolute times drift on noisy machines, ratios hold.
// Targets are reported, never asserted. The driver is
// bench/cmd/sandboxer-bench (`make bench`).
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Units of a figure.
const (
	UnitMS    = "ms"
	UnitCount = "count"
	UnitMiB   = "MiB"
)

// TargetKind says what a target bounds.
type TargetKind string

// Target kinds.
const (
	// TargetRatio bounds the ratio of the median to the baseline's median.
	TargetRatio TargetKind = "ratio<="
	// TargetMax bounds the median, in the figure's unit.
	TargetMax TargetKind = "median<="
	// TargetMin asks the minimum sample to reach a value (counts).
	TargetMin TargetKind = "min>="
)

// Target is a goal a figure is reported against.
type Target struct {
	Kind  TargetKind `json:"kind"`
	Value float64    `json:"value"`
}

// String renders "<= 1.10x", "<= 300 ms" or ">= 20" for a figure in unit.
func (t Target) String(unit string) string {
	suffix := ""
	if unit == UnitMS {
		suffix = " ms"
	}
	switch t.Kind {
	case TargetRatio:
		return fmt.Sprintf("<= %.2fx", t.Value)
	case TargetMax:
		return fmt.Sprintf("<= %s%s", trimFloat(t.Value), suffix)
	case TargetMin:
		return fmt.Sprintf(">= %s", trimFloat(t.Value))
	}
	return ""
}

// Figure is one measured quantity.
type Figure struct {
	// Name says what was measured ("provision postgres").
	Name string `json:"name"`
	// Unit is UnitMS, UnitCount or UnitMiB.
	Unit string `json:"unit"`
	// Samples are the raw measurements, in the order taken.
	Samples []float64 `json:"samples"`
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	// Baseline names the figure this one is compared with ("" for none);
	// BaselineMedian is that figure's median and Ratio is Median over it.
	Baseline       string  `json:"baseline,omitempty"`
	BaselineMedian float64 `json:"baseline_median,omitempty"`
	Ratio          float64 `json:"ratio,omitempty"`
	// Compare names a second figure to show a ratio to, in the note
	// (CompareRatio), for context: it carries no target.
	Compare      string  `json:"compare,omitempty"`
	CompareRatio float64 `json:"compare_ratio,omitempty"`
	// Target is the goal (nil: none) and Met whether the figure reaches it.
	Target *Target `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
	// Note says what the figure includes, or anything a reader needs.
	Note string `json:"note,omitempty"`
	// NA, when set, says why the figure cannot be measured on this
	// runtime ("n/a on kubernetes: ..."): it is reported, not dropped.
	NA string `json:"na,omitempty"`
}

// Report is one run of the suite on one runtime.
type Report struct {
	Runtime  string `json:"runtime"`
	Endpoint string `json:"endpoint"`
	Version  string `json:"version"`
	Floor    string `json:"floor"`
	// Mode is how the row's sandboxes and baselines are reached (host or
	// network).
	Mode Mode   `json:"mode"`
	Host string `json:"host"`
	// Notes are what a reader must know of this row's run, such as a count
	// lowered to what the runtime fits.
	Notes   []string  `json:"notes,omitempty"`
	Rounds  int       `json:"rounds"`
	Started time.Time `json:"started"`
	// ElapsedSeconds is how long the whole run took.
	ElapsedSeconds float64           `json:"elapsed_s"`
	Images         map[string]string `json:"images"`
	// Servers are the server versions the engines' images run, by engine
	// name, as each server told its real client in the warm-up round: the
	// version every figure of the row was measured on.
	Servers map[string]string `json:"servers,omitempty"`
	Figures []*Figure         `json:"figures"`
	// Errors are failures of individual samples (the run goes on).
	Errors []string `json:"errors,omitempty"`
}

// Figure returns the figure named name, or nil.
func (r *Report) Figure(name string) *Figure {
	for _, f := range r.Figures {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Finish computes every figure's statistics, ratio and verdict. A figure
// whose baseline is missing or has no samples gets no ratio.
func (r *Report) Finish() {
	for _, f := range r.Figures {
		f.Median, f.Min, f.Max = Stats(f.Samples)
	}
	for _, f := range r.Figures {
		f.Ratio, f.BaselineMedian, f.CompareRatio, f.Met = 0, 0, 0, nil
		if b := r.Figure(f.Baseline); b != nil && len(b.Samples) > 0 && b.Median > 0 && len(f.Samples) > 0 {
			f.BaselineMedian = b.Median
			f.Ratio = f.Median / b.Median
		}
		if c := r.Figure(f.Compare); c != nil && len(c.Samples) > 0 && c.Median > 0 && len(f.Samples) > 0 {
			f.CompareRatio = f.Median / c.Median
		}
		if f.Target == nil || len(f.Samples) == 0 {
			continue
		}
		var met bool
		switch f.Target.Kind {
		case TargetRatio:
			if f.Ratio == 0 {
				continue
			}
			met = f.Ratio <= f.Target.Value
		case TargetMax:
			met = f.Median <= f.Target.Value
		case TargetMin:
			met = f.Min >= f.Target.Value
		}
		f.Met = &met
	}
}

// Stats returns the median (the mean of the two middle samples for an even
// count), min and max of samples; zeros for none.
func Stats(samples []float64) (median, lo, hi float64) {
	if len(samples) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	n := len(s)
	median = s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return median, s[0], s[n-1]
}

// Percentile returns the p-th percentile (0..100) of samples by the
// nearest-rank method; 0 for none.
func Percentile(samples []float64, p float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// WriteMarkdown renders the report as a heading, a few lines of context
// and one table.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# sandboxer bench: %s\n\n", r.Runtime)
	fmt.Fprintf(&b, "- runtime: %s %s at %s; baseline floor: %s\n", r.Runtime, r.Version, r.Endpoint, r.Floor)
	fmt.Fprintf(&b, "- mode: %s\n", r.Mode.Describe())
	fmt.Fprintf(&b, "- host: %s\n", r.Host)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- note: %s\n", n)
	}
	fmt.Fprintf(&b, "- started %s, took %s; %d rounds (medians, min and max over the samples)\n",
		r.Started.UTC().Format(time.RFC3339), time.Duration(r.ElapsedSeconds*float64(time.Second)).Round(time.Second), r.Rounds)
	for _, name := range slices.Sorted(maps.Keys(r.Images)) {
		fmt.Fprintf(&b, "- image %s: %s", name, r.Images[name])
		if v := r.Servers[name]; v != "" {
			fmt.Fprintf(&b, " (server %s)", v)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	b.WriteString(r.Table())
	if len(r.Errors) > 0 {
		b.WriteString("\nErrors during the run:\n\n")
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Table renders the figures as a Markdown table.
func (r *Report) Table() string {
	var b strings.Builder
	b.WriteString("| measure | median | min | max | n | baseline | ratio | target | met | note |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|---|---|---|\n")
	for _, f := range r.Figures {
		base, ratio := "", ""
		if f.Baseline != "" {
			base = f.Baseline
			if f.Ratio > 0 {
				base = fmt.Sprintf("%s (%s)", f.Baseline, value(f.BaselineMedian, f.Unit))
				ratio = fmt.Sprintf("%.2fx", f.Ratio)
			}
		}
		target, met := "", ""
		if f.Target != nil {
			target = f.Target.String(f.Unit)
			switch {
			case f.Met == nil:
				met = "n/a"
			case *f.Met:
				met = "yes"
			default:
				met = "**no**"
			}
		}
		note := f.Note
		if f.NA != "" {
			note = f.NA
		}
		if f.CompareRatio > 0 {
			note = strings.TrimPrefix(fmt.Sprintf("%s; %.2fx %s", note, f.CompareRatio, f.Compare), "; ")
		}
		med, lo, hi := value(f.Median, f.Unit), value(f.Min, f.Unit), value(f.Max, f.Unit)
		if len(f.Samples) == 0 {
			med, lo, hi = "n/a", "", ""
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |\n",
			f.Name, med, lo, hi, len(f.Samples), base, ratio, target, met, note)
	}
	return b.String()
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// value renders a sample: milliseconds with a precision that suits their
// size, counts as integers.
func value(v float64, unit string) string {
	switch unit {
	case UnitCount:
		return trimFloat(v)
	case UnitMiB:
		return fmt.Sprintf("%.1f MiB", v)
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// ms converts a duration to fractional milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
