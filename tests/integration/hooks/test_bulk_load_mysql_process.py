"""MySQL chunk loads in a separate process: kill -9 mid-load, and peak memory against chunk size."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from airflow_bulkload.hooks.bulk_load import BulkLoadHook
from tests.harness import REPO_ROOT, MotoServer, TestDatabase, put_chunk


def start_child(db: TestDatabase, table: str, chunk: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.hooks.load_chunk_child",
            db.conn_id,
            table,
            json.dumps(chunk),
        ],
        cwd=REPO_ROOT,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def rows_of(count: int, width: int = 0) -> bytes:
    pad = b"x" * width
    return b"".join(b"%d,%s%d\n" % (i, pad, i) for i in range(1, count + 1))


def test_kill_9_mid_load_then_rerun_loads_each_row_once(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    mysql_db.query("CREATE TABLE big (id BIGINT PRIMARY KEY, v VARCHAR(40)) ENGINE=InnoDB")
    # An earlier chunk's row: into a non-empty table MariaDB writes row by row (into an empty one
    # it buffers for its bulk path), so the kill can be timed on rows being written.
    mysql_db.query("INSERT INTO big VALUES (0, 'earlier chunk')")
    count = 1_000_000
    chunk = put_chunk(moto_server, s3_bucket, "kill/00000.csv.gz", rows_of(count), rows=count)
    child = start_child(mysql_db, "big", chunk)
    try:
        # Kill once the server has been running the child's LOAD for a second (of about five):
        # then rows are streaming in and the transaction is open.
        deadline = time.monotonic() + 120
        loading: list[tuple] = []
        while time.monotonic() < deadline and child.poll() is None:
            loading = mysql_db.query(
                "SELECT ID FROM information_schema.PROCESSLIST "
                "WHERE DB = %s AND INFO LIKE 'LOAD DATA%%' AND TIME_MS >= 1000",
                (mysql_db.name,),
            )
            if loading:
                break
            time.sleep(0.01)
        assert child.poll() is None, f"the load ended before the kill: {child.communicate()}"
        assert loading, "never saw the load running"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()

    assert child.returncode == -signal.SIGKILL
    # the server rolled the killed transaction back: only the earlier row is there
    assert mysql_db.query("SELECT COUNT(*) FROM big") == [(1,)]
    assert mysql_db.query("SELECT COUNT(*) FROM bulkload_chunk_ledger") == [(0,)]
    result = BulkLoadHook(conn_id=mysql_db.conn_id).load_chunk("big", chunk, load_id="rerun")
    assert (result.rows, result.skipped) == (count, False)
    assert mysql_db.query("SELECT COUNT(*), COUNT(DISTINCT id), MAX(id) FROM big") == [
        (count + 1, count + 1, count)
    ]
    assert mysql_db.query("SELECT row_count, load_id FROM bulkload_chunk_ledger") == [
        (count, "rerun")
    ]


def test_peak_memory_does_not_grow_with_chunk_size(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    peaks = {}
    for name, count in (("small", 100_000), ("large", 600_000)):  # ~15 MB and ~90 MB
        mysql_db.query(f"CREATE TABLE {name} (id BIGINT PRIMARY KEY, v VARCHAR(200))")
        data = rows_of(count, width=140)
        key = f"rss/{name}.csv.gz"
        chunk = put_chunk(moto_server, s3_bucket, key, data, rows=count)
        del data
        child = start_child(mysql_db, name, chunk)
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report["result"]["rows"] == count
        peaks[name] = report["max_rss_kib"]
    assert mysql_db.query("SELECT COUNT(*) FROM large") == [(600_000,)]
    # 75 MB more data; allow a few MB of allocator noise, nowhere near the size difference
    assert peaks["large"] - peaks["small"] < 16 * 1024, peaks
