// Command failures prints, from a `go test -v` log, every failed leaf test
// (a failed test none of whose subtests failed) with the last lines it
// printed, so that the end of a long CI log names what failed and why.
//
//	go tool test2json < build/test.log | go run ./hack/failures [-lines 40]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is the part of a test2json event this command reads.
type event struct {
	Action string
	Test   string
	Output string
}

func main() {
	lines := flag.Int("lines", 40, "lines of each failed test's output to print")
	flag.Parse()
	if err := report(os.Stdin, os.Stdout, *lines); err != nil {
		fmt.Fprintln(os.Stderr, "failures:", err)
		os.Exit(1)
	}
}

// report reads a test2json stream from r and writes the failed leaf tests
// to w, each with the last n lines of its output.
func report(r io.Reader, w io.Writer, n int) error {
	output := map[string][]string{}
	var failed []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" {
			continue
		}
		switch ev.Action {
		case "output":
			out := append(output[ev.Test], strings.TrimRight(ev.Output, "\n"))
			if len(out) > n {
				out = out[len(out)-n:]
			}
			output[ev.Test] = out
		case "fail":
			failed = append(failed, ev.Test)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	leaves := leafTests(failed)
	fmt.Fprintf(w, "failed leaf tests: %d\n", len(leaves))
	for _, t := range leaves {
		fmt.Fprintf(w, "--- %s (last %d lines)\n", t, n)
		for _, l := range output[t] {
			fmt.Fprintln(w, "    "+l)
		}
	}
	return nil
}

// leafTests keeps the failed tests that have no failed subtest, in order,
// once each.
func leafTests(failed []string) []string {
	var leaves []string
	seen := map[string]bool{}
	for _, t := range failed {
		if seen[t] {
			continue
		}
		seen[t] = true
		parent := false
		for _, u := range failed {
			if strings.HasPrefix(u, t+"/") {
				parent = true
				break
			}
		}
		if !parent {
			leaves = append(leaves, t)
		}
	}
	return leaves
}
