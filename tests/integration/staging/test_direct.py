"""Direct chunks: S3 input objects loaded as stored, exactly, with no staged copy.

Each case runs on both engines: MySQL's ``LOAD DATA`` reads the stream as rewritten in flight
(``dialects/mysql/stored_csv``).
"""

from __future__ import annotations

import gzip
from typing import Any

import pytest

from airflow_bulkload.exceptions import ChunkLoadError, InputAlreadyLoadedError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StageResult, StagingOptions, stage
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import create_and_load, long_quoted_value_csv


def plan(moto: MotoServer, bucket: str, source: str, **options: Any) -> StageResult:
    defaults: dict[str, Any] = {
        "file_format": FileFormat(header=True),
        "chunk_size": 4000,
        "probe_key": ["id"],
        "direct": True,
        "quoted_newlines": False,  # these cases are about byte ranges
    }
    return stage(
        source,
        s3=moto.client("s3"),
        staging_uri=f"s3://{bucket}/staging",
        dag_id="nightly",
        table="notes",
        run="2026-11-21",
        options=StagingOptions(**(defaults | options)),
    )


def run_load(hook: BulkLoadHook, staged: StageResult, *, reload: bool = False) -> dict[str, Any]:
    hook.reconcile("notes", staged.manifest_uri, reload=reload, load_id="t")
    for chunk in staged.manifest.chunks:
        hook.load_chunk("notes", chunk, load_id="t")
    return hook.verify_load("notes", staged.manifest_uri, load_id="t")


def quoted_note(i: int) -> str:
    return f'"note {i}, with ""quotes""\nand a line end"' if i % 7 == 0 else f"note {i}"


def put(moto: MotoServer, bucket: str, key: str, body: bytes) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


@pytest.fixture
def notes(any_db: TestDatabase) -> TestDatabase:
    any_db.query("CREATE TABLE notes (id int PRIMARY KEY, note text, n int)")
    return any_db


def expected(ids: range) -> list[tuple[Any, ...]]:
    return [
        (i, f'note {i}, with "quotes"\nand a line end' if i % 7 == 0 else f"note {i}", i * 2)
        for i in ids
    ]


def test_plain_and_gzip_objects_load_exactly_with_nothing_copied(
    notes: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    plain = "id,note,n\n" + "".join(f"{i},{quoted_note(i)},{i * 2}\n" for i in range(1, 801))
    reordered = "n,id,note\r\n" + "".join(
        f"{i * 2},{i},{quoted_note(i)}\r\n" for i in range(801, 1201)
    )
    put(moto_server, s3_bucket, "in/a.csv", plain.encode())
    put(moto_server, s3_bucket, "in/b.csv.gz", gzip.compress(reordered.encode()))

    staged = plan(moto_server, s3_bucket, f"s3://{s3_bucket}/in/")

    ranges = [c.byte_range for c in staged.manifest.chunks if c.uri.endswith("a.csv")]
    assert len(ranges) > 2  # the plain object is cut in byte ranges
    assert staged.manifest.chunks[-1].byte_range is None  # the gzip object is one chunk
    listed = moto_server.client("s3").list_objects_v2(Bucket=s3_bucket, Prefix="staging/")
    assert [o["Key"].rsplit("/", 1)[-1] for o in listed["Contents"]] == ["manifest.json"]
    try:
        report = run_load(BulkLoadHook(conn_id=notes.conn_id), staged)
    except ChunkLoadError as exc:  # a cut inside a quoted value is refused, never mis-split
        assert "quoted_newlines=True" in str(exc)
        assert notes.query("SELECT count(*) FROM notes") < [(1200,)]
        return
    assert report["rows_expected"] == 1200
    assert notes.query("SELECT id, note, n FROM notes ORDER BY id") == expected(range(1, 1201))


def test_a_cut_inside_a_quoted_value_fails_and_whole_objects_load(
    notes: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """Every record holds a quoted line end, so some cut lands inside one: that range fails
    before commit, naming the remedy; with quoted_newlines=True each object loads whole."""
    body = "id,note,n\n" + "".join(
        f'{i},"long note {i} {"x" * 40}\n{"y" * 40}",{i * 2}\n' for i in range(1, 301)
    )
    put(moto_server, s3_bucket, "in/a.csv", body.encode())
    hook = BulkLoadHook(conn_id=notes.conn_id)
    cut = plan(moto_server, s3_bucket, f"s3://{s3_bucket}/in/")
    assert len(cut.manifest.chunks) > 1

    with pytest.raises(ChunkLoadError, match=r"quoted_newlines=True"):
        run_load(hook, cut)

    whole = plan(moto_server, s3_bucket, f"s3://{s3_bucket}/in/", quoted_newlines=True)
    assert len(whole.manifest.chunks) == 1
    run_load(hook, whole, reload=True)
    assert notes.query("SELECT count(*), sum(id), sum(n) FROM notes") == [(300, 45150, 90300)]


def test_truncate_then_rerun_reloads_direct_chunks_by_their_probes(
    notes: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    body = "id,note,n\n" + "".join(f"{i},note {i},{i * 2}\n" for i in range(1, 601))
    put(moto_server, s3_bucket, "in/a.csv", body.encode())
    hook = BulkLoadHook(conn_id=notes.conn_id)
    staged = plan(moto_server, s3_bucket, f"s3://{s3_bucket}/in/")
    run_load(hook, staged)
    ledger = "bulkload.chunk_ledger" if notes.engine == "postgres" else "bulkload_chunk_ledger"
    entries = notes.query(f"SELECT probe FROM {ledger}")
    assert len(entries) == len(staged.manifest.chunks) > 1
    assert all(p is not None for (p,) in entries)
    notes.query("TRUNCATE notes")

    run_load(hook, staged)

    assert notes.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(600, 600)]


def test_a_bad_value_in_a_later_range_names_the_object_and_line(
    notes: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    body = "id,note,n\n" + "".join(
        f"{i},note {i},{'many' if i == 500 else i * 2}\n" for i in range(1, 601)
    )
    put(moto_server, s3_bucket, "in/a.csv", body.encode())
    staged = plan(moto_server, s3_bucket, f"s3://{s3_bucket}/in/")

    with pytest.raises(ChunkLoadError) as failure:
        run_load(BulkLoadHook(conn_id=notes.conn_id), staged)

    assert failure.value.source == f"s3://{s3_bucket}/in/a.csv"
    assert failure.value.line == 501  # the header is line 1
    assert "many" in str(failure.value)


def test_an_object_changed_after_planning_is_not_loaded(
    notes: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,2\n2,b,4\n")
    staged = plan(moto_server, s3_bucket, f"s3://{s3_bucket}/in/")
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,changed,2\n3,c,6\n")

    with pytest.raises(ChunkLoadError, match="changed or went away"):
        run_load(BulkLoadHook(conn_id=notes.conn_id), staged)
    assert notes.query("SELECT count(*) FROM notes") == [(0,)]


def test_a_source_object_changed_between_runs_is_replaced_exactly_once(
    notes: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """In a bucket that keeps versions, the old rows of a changed object are read from the
    version that loaded them and taken out (reload), and the new rows load once."""
    s3 = moto_server.client("s3")
    s3.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    first = "id,note,n\n" + "".join(f"{i},old {i},{i}\n" for i in range(1, 401))
    put(moto_server, s3_bucket, "in/a.csv", first.encode())
    hook = BulkLoadHook(conn_id=notes.conn_id)
    run_load(hook, plan(moto_server, s3_bucket, f"s3://{s3_bucket}/in/"))
    second = "id,note,n\n" + "".join(f"{i},new {i},{i}\n" for i in range(201, 601))
    put(moto_server, s3_bucket, "in/a.csv", second.encode())
    changed = plan(moto_server, s3_bucket, f"s3://{s3_bucket}/in/")

    with pytest.raises(InputAlreadyLoadedError):  # a loaded date is replaced only on request
        run_load(hook, changed)
    run_load(hook, changed, reload=True)

    assert notes.query(
        "SELECT min(id), max(id), count(*), sum(CASE WHEN note LIKE 'new%' THEN 1 ELSE 0 END) "
        "FROM notes"
    ) == [(201, 600, 400, 400)]


def test_a_quoted_value_of_many_lines_near_the_record_limit_loads_exactly(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What DuckDB's parallel CSV reader refuses when staging (a value of about 8 MB whose lines
    look like records; docs/how-it-works.md, ``max_errors``) loads as stored, exactly."""
    rows, body = long_quoted_value_csv()
    moto_server.client("s3").put_object(Bucket=s3_bucket, Key="in/long.csv", Body=body)
    text = "text" if any_db.engine == "postgres" else "LONGTEXT"
    create_and_load(
        any_db,
        moto_server,
        s3_bucket,
        "long_values",
        f"id int PRIMARY KEY, v {text}",
        direct=True,
        expect_direct=True,
        file_format=FileFormat(header=True),
    )
    assert any_db.query("SELECT count(*) FROM long_values") == [(1000,)]
    [(stored,)] = any_db.query("SELECT v FROM long_values WHERE id = 500")
    assert stored == rows[500][1]
