"""Run BulkLoadHook.load_chunk in a process of its own (killed or measured by the parent test).

Usage: python -m tests.integration.hooks.load_chunk_child CONN_ID TABLE CHUNK_JSON
Prints one JSON line: the chunk result and the peak RSS in KiB.
"""

from __future__ import annotations

import json
import sys

from tests.harness import configure_process_environment

configure_process_environment()

from airflow_bulkload.hooks.bulk_load import BulkLoadHook  # noqa: E402


def main() -> None:
    conn_id, table, chunk = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    result = BulkLoadHook(conn_id=conn_id).load_chunk(table, chunk, load_id="child")
    # VmHWM, not ru_maxrss: Linux carries the forking parent's peak into ru_maxrss across exec
    with open("/proc/self/status") as status:
        peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print(json.dumps({"result": result.to_dict(), "max_rss_kib": peak_kib}), flush=True)


if __name__ == "__main__":
    main()
