"""Load slots: at most N chunks load into a table at once, enforced on the database server."""

from __future__ import annotations

import time
from contextlib import closing

import pytest

from airflow_bulkload.hooks import BulkLoadHook
from tests.harness import MotoServer, TestDatabase, put_chunk


def test_a_load_waits_for_a_free_slot_and_a_dead_session_frees_its_slot(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    any_db.query("CREATE TABLE t (id INT PRIMARY KEY)")
    chunk = put_chunk(moto_server, s3_bucket, "c0.csv.gz", b"1\n2\n", rows=2)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    table = hook.dialect.table_ref("t")
    holder = hook.get_conn()
    try:
        table = hook.dialect.qualified_name(holder, table)
        assert hook.dialect.try_acquire_load_slot(holder, table, 0)
        holder.commit()
        with pytest.raises(TimeoutError, match="no free load slot"):
            hook.load_chunk("t", chunk, max_concurrent_loads=1, slot_wait_timeout=0)
        assert any_db.query("SELECT count(*) FROM t") == [(0,)]
        # a second slot is free: the load goes ahead beside the holder
        assert hook.load_chunk("t", chunk, max_concurrent_loads=2).rows == 2
    finally:
        holder.close()  # as a killed worker's connection would go
    with closing(hook.get_conn()) as conn:
        # the server ends the closed session's locks as it notices it gone: at once, or a moment
        # later on a busy machine (MariaDB's GET_LOCK)
        deadline = time.monotonic() + 10
        while not hook.dialect.try_acquire_load_slot(conn, table, 0):
            assert time.monotonic() < deadline, "the dead session's slot never freed"
            time.sleep(0.1)
        hook.dialect.release_load_slot(conn, table, 0)
    assert hook.load_chunk("t", chunk, max_concurrent_loads=1).skipped
