#!/usr/bin/env bash
# hack/ci.sh — what `make ci` runs: bring the environment up, run every test
# verbosely with the required runtimes (a missing runtime or image fails),
# lint, and always tear down what was started.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s)
mkdir -p build
rm -f build/test.log # the log cleanup reads is this run's, never an older one's
# shellcheck disable=SC2317 # run by the EXIT trap, which shellcheck cannot see
cleanup() {
	rc=$?
	echo "::: env-down"
	hack/env.sh down || rc=1
	# The end of the log is what a CI tail keeps: the failed leaf tests, each
	# with the last lines it printed, then the counts.
	if [ -s build/test.log ]; then
		if grep -q -- '--- FAIL' build/test.log; then
			echo "::: failures"
			go tool test2json <build/test.log | go run ./hack/failures -lines 40 || rc=1
		fi
		echo "tests skipped for want of a runtime: ${skipped:-none}"
		echo "summary: $(grep -c -- '--- PASS' build/test.log) passed, $(grep -c -- '--- FAIL' build/test.log) failed, $(grep -c -- '--- SKIP' build/test.log) skipped"
	fi
	echo "::: make ci finished in $(($(date +%s) - t0))s, exit $rc"
	exit "$rc"
}
trap cleanup EXIT

echo "::: env (SANDBOXER_REQUIRE=${SANDBOXER_REQUIRE})"
hack/env.sh up
t1=$(date +%s)
echo "::: env up in $((t1 - t0))s"

echo "::: lint"
make --no-print-directory lint

echo "::: test"
status=0
go test -count=1 -v -timeout "${TEST_TIMEOUT:-80m}" ./... 2>&1 | tee build/test.log || status=$?
echo "::: tests in $(($(date +%s) - t1))s"

# A required runtime must not have been skipped anywhere. internal/testenv's
# Unavailable, where a missing runtime or fixture ends a test, prints one
# marker line per test it ends: SANDBOXER-REQUIRED-SKIPPED (with the test's
# failure) when SANDBOXER_REQUIRE lists the runtime, SANDBOXER-SKIPPED
# otherwise.
if grep -E '^SANDBOXER-REQUIRED-SKIPPED ' build/test.log >&2; then
	echo "a required runtime was unavailable to the tests above (SANDBOXER_REQUIRE=${SANDBOXER_REQUIRE})" >&2
	status=1
fi
skipped=$(grep -oE '^SANDBOXER-SKIPPED runtime=[^ ]+' build/test.log | sed 's/.*runtime=//' | sort | uniq -c | awk '{printf "%s%s: %s", sep, $2, $1; sep=", "}' || true)
exit "$status"
