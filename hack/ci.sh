#!/usr/bin/env bash
# hack/ci.sh — what `make ci` runs: bring the environment up, run every test
# verbosely with the required runtimes (a missing runtime or image fails),
# lint, and always tear down what was started.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s)
cleanup() {
	rc=$?
	echo "::: env-down"
	hack/env.sh down || rc=1
	echo "::: make ci finished in $(($(date +%s) - t0))s, exit $rc"
	exit $rc
}
trap cleanup EXIT

echo "::: env (SANDBOXER_REQUIRE=${SANDBOXER_REQUIRE})"
hack/env.sh up
t1=$(date +%s)
echo "::: env up in $((t1 - t0))s"

echo "::: lint"
make --no-print-directory lint

echo "::: test"
mkdir -p build
set -o pipefail
go test -count=1 -v -timeout "${TEST_TIMEOUT:-60m}" ./... 2>&1 | tee build/test.log
echo "::: tests in $(($(date +%s) - t1))s"

# A required runtime must not have been skipped anywhere.
if grep -E -- '--- SKIP' build/test.log | grep -E "$(echo "${SANDBOXER_REQUIRE}" | tr ', ' '||')" ; then
	echo "a required runtime's test was skipped" >&2
	exit 1
fi
echo "summary: $(grep -c -- '--- PASS' build/test.log) passed, $(grep -c -- '--- FAIL' build/test.log) failed, $(grep -c -- '--- SKIP' build/test.log) skipped"
