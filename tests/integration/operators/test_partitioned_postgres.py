"""A range-partitioned PostgreSQL target: autovacuum off per partition, rows routed through the
parent, everything back as it was after finalize, and after a failed load's restore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.hooks import BulkLoadHook, TableStateHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StagingOptions, stage
from tests.harness import MotoServer, TestDatabase, put_chunk

SCHEMA = """
CREATE TABLE events (
    id bigint NOT NULL,
    day date NOT NULL,
    note text,
    PRIMARY KEY (id, day)
) PARTITION BY RANGE (day);
CREATE TABLE events_2026_01 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')
    WITH (fillfactor = 90);
CREATE TABLE events_2026_02 PARTITION OF events FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
CREATE TABLE events_2026_03 PARTITION OF events FOR VALUES FROM ('2026-03-01') TO ('2026-04-01')
    WITH (autovacuum_vacuum_scale_factor = 0.05);
CREATE INDEX events_note ON events (note);
"""


def catalog(db: TestDatabase) -> dict[str, Any]:
    return {
        "indexes": db.query(
            "SELECT c.relname, i.indrelid::regclass::text, pg_get_indexdef(i.indexrelid)"
            " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid IN (SELECT relid FROM pg_partition_tree('events'))"
            " ORDER BY 1"
        ),
        "reloptions": db.query(
            "SELECT relname, reloptions FROM pg_class WHERE oid IN"
            " (SELECT relid FROM pg_partition_tree('events')) ORDER BY 1"
        ),
    }


@pytest.fixture
def events(pg_db: TestDatabase) -> dict[str, Any]:
    pg_db.query(SCHEMA)
    return catalog(pg_db)


def test_a_partitioned_table_loads_exactly_and_comes_back_as_it_was(
    pg_db: TestDatabase,
    events: dict[str, Any],
    moto_server: MotoServer,
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    source = tmp_path / "events.csv"
    source.write_text(
        "".join(f"{i},2026-0{1 + i % 3}-{1 + i % 28:02d},note {i}\n" for i in range(3000))
    )
    staged = stage(
        str(source),
        s3=moto_server.client("s3"),
        staging_uri=f"s3://{s3_bucket}/staging",
        dag_id="d",
        table="events",
        run="r",
        options=StagingOptions(
            file_format=FileFormat(), columns=["id", "day", "note"], chunk_size=20_000
        ),
    )
    hook = TableStateHook(conn_id=pg_db.conn_id)
    prepared = hook.prepare("events", load_id="P", incoming_bytes=10**9)
    assert prepared["dropped"] == []  # partitioned indexes and keys are kept
    options = dict(
        pg_db.query(
            "SELECT relname, reloptions FROM pg_class WHERE relname LIKE 'events_2026%' AND relkind = 'r'"
        )
    )
    assert all("autovacuum_enabled=false" in opts for opts in options.values())

    loader = BulkLoadHook(conn_id=pg_db.conn_id)
    for chunk in staged.manifest.chunks:
        loader.load_chunk("events", chunk, load_id="P")
    hook.finalize("events", load_id="P")

    assert catalog(pg_db) == events
    assert pg_db.query("SELECT count(*), count(DISTINCT id) FROM events") == [(3000, 3000)]
    assert pg_db.query("SELECT count(*) FROM events_2026_02") == [(1000,)]
    loader.verify_load("events", staged.manifest_uri)


def test_a_failed_load_into_a_partitioned_table_is_restored(
    pg_db: TestDatabase, events: dict[str, Any], moto_server: MotoServer, s3_bucket: str
) -> None:
    hook = TableStateHook(conn_id=pg_db.conn_id)
    hook.prepare("events", load_id="F")
    bad = put_chunk(moto_server, s3_bucket, "c0.csv.gz", b"1,2026-01-05,x\n2,2027-01-01,nowhere\n")
    with pytest.raises(ChunkLoadError, match="partition"):
        BulkLoadHook(conn_id=pg_db.conn_id).load_chunk("events", bad)
    hook.restore("events", load_id="F")
    assert catalog(pg_db) == events


def test_forcing_drops_on_a_partitioned_table_is_refused_before_any_change(
    pg_db: TestDatabase, events: dict[str, Any]
) -> None:
    with pytest.raises(ValueError, match="partitioned"):
        TableStateHook(conn_id=pg_db.conn_id).prepare("events", load_id="X", drop_indexes=True)
    assert catalog(pg_db) == events
