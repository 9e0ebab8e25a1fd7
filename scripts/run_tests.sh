#!/usr/bin/env bash
# The test suite (everything but -m celery) as two pytest processes side by side:
#   [settings]  the tests marked server_settings (every e2e test and the bulk-mode integration
#               tests), which change or compare the servers' own settings: one at a time;
#   [rest]      everything else, each test in a database of its own.
# On a 2-core machine an e2e test keeps about one core busy with Airflow's processes, so the two
# halves overlap instead of queueing. Extra arguments go to both pytest processes.
set -uo pipefail
cd "$(dirname "$0")/.."
# each half makes an Airflow home (and SQLite metadata database) of its own
unset BULKLOAD_TEST_AIRFLOW_HOME

run() {
    local name=$1
    shift
    .venv/bin/pytest "$@" 2>&1 | sed -u "s/^/[$name] /"
    return "${PIPESTATUS[0]}"
}

started=$SECONDS
run settings -m "server_settings and not celery" "$@" &
settings=$!
run rest -m "not server_settings and not celery" "$@" &
rest=$!
wait "$settings"
settings_rc=$?
wait "$rest"
rest_rc=$?
echo "suite: settings exit $settings_rc, rest exit $rest_rc, $((SECONDS - started)) s wall"
[ "$settings_rc" = 0 ] && [ "$rest_rc" = 0 ]
