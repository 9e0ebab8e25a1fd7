"""The table is the truth: a ledger entry counts only while its rows are in the table.

Each case is what a user does between two runs of the same date (truncate, drop + re-create,
delete one chunk's rows, VACUUM FULL / OPTIMIZE TABLE, a second input, a rewritten chunk), run
through the same hook calls the pipeline makes: reconcile (the ``withdraw_superseded`` task),
one ``load_chunk`` per chunk, then ``verify_load`` (the report).
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.exceptions import (
    BulkLoadError,
    ChunkLoadError,
    InputAlreadyLoadedError,
    LoadVerificationError,
    WithdrawMismatchError,
)
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.hooks.bulk_load import ChunkResult
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StageResult, StagingOptions, stage
from tests.harness import MotoServer, TestDatabase

ROWS = 600


def rows(first: int, last: int) -> str:
    return "".join(f"{i},note {i}\n" for i in range(first, last + 1))


def create_notes(db: TestDatabase, *, key: bool = True) -> None:
    text = "text" if db.engine == "postgres" else "VARCHAR(100)"
    db.query(f"CREATE TABLE notes (id int{' PRIMARY KEY' if key else ''} NOT NULL, note {text})")


def stage_input(
    moto: MotoServer,
    bucket: str,
    path: Path,
    *,
    key: bool = True,
    run: str = "2026-11-21",
    dag_id: str = "nightly",
    **options: Any,
) -> StageResult:
    """``path`` staged as the pipeline would for ``notes``; ``options`` override the
    :class:`StagingOptions` (id, note columns, 2 kB chunks, the id as the probe key)."""
    defaults: dict[str, Any] = {
        "file_format": FileFormat(header=False),
        "columns": ["id", "note"],
        "chunk_size": 2000,
        "probe_key": ["id"] if key else [],
    }
    return stage(
        str(path),
        s3=moto.client("s3"),
        staging_uri=f"s3://{bucket}/staging",
        dag_id=dag_id,
        table="notes",
        run=run,
        options=StagingOptions(**(defaults | options)),
    )


def run_load(hook: BulkLoadHook, result: StageResult, *, reload: bool = False) -> list[ChunkResult]:
    """What the pipeline does for one run of a date, in order."""
    hook.reconcile("notes", result.manifest_uri, reload=reload, load_id="test/run")
    loaded = [
        hook.load_chunk("notes", chunk, load_id="test/run") for chunk in result.manifest.chunks
    ]
    hook.verify_load("notes", result.manifest_uri, load_id="test/run")
    return loaded


def loaded(
    db: TestDatabase, moto: MotoServer, bucket: str, source: Path, *, key: bool = True
) -> tuple[BulkLoadHook, StageResult]:
    """``notes`` created, ``source`` staged and loaded once (the first run of the date)."""
    create_notes(db, key=key)
    hook = BulkLoadHook(conn_id=db.conn_id)
    staged = stage_input(moto, bucket, source, key=key)
    assert len(staged.manifest.chunks) >= 2
    assert not any(r.skipped for r in run_load(hook, staged))
    return hook, staged


def ids(db: TestDatabase) -> list[int]:
    return [r[0] for r in db.query("SELECT id FROM notes ORDER BY id")]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "notes.csv"
    path.write_text(rows(1, ROWS))
    return path


def test_truncate_then_rerun_loads_the_rows_again(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path
) -> None:
    hook, staged = loaded(any_db, moto_server, s3_bucket, source)
    any_db.query("TRUNCATE TABLE notes")

    again = run_load(hook, staged)

    assert not any(r.skipped for r in again)
    assert ids(any_db) == list(range(1, ROWS + 1))


def test_drop_and_recreate_then_rerun_loads_the_rows_again(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path
) -> None:
    hook, staged = loaded(any_db, moto_server, s3_bucket, source)
    any_db.query("DROP TABLE notes")
    create_notes(any_db)

    run_load(hook, staged)

    assert ids(any_db) == list(range(1, ROWS + 1))


def test_deleting_one_chunks_rows_reloads_that_chunk_only(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path
) -> None:
    hook, staged = loaded(any_db, moto_server, s3_bucket, source)
    second = staged.manifest.chunks[1]
    first_id, last_id = int(second.first_key[0]), int(second.last_key[0])  # type: ignore[index]
    # the first and last rows gone, the middle ones still there: reloading must not double them
    any_db.query(f"DELETE FROM notes WHERE id IN ({first_id}, {last_id})")

    again = run_load(hook, staged)

    assert [r.skipped for r in again] == [i != 1 for i in range(len(again))]
    assert ids(any_db) == list(range(1, ROWS + 1))


def test_a_row_deleted_inside_a_chunk_fails_the_report_with_the_numbers(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path
) -> None:
    hook, staged = loaded(any_db, moto_server, s3_bucket, source)
    middle = int(staged.manifest.chunks[0].first_key[0]) + 1  # type: ignore[index]
    any_db.query(f"DELETE FROM notes WHERE id = {middle}")

    with pytest.raises(LoadVerificationError, match=rf"expected {ROWS} rows, found {ROWS - 1}"):
        run_load(hook, staged)
    # an explicit reload takes what is left of the date's rows back out and loads them once
    run_load(hook, staged, reload=True)
    assert ids(any_db) == list(range(1, ROWS + 1))


@pytest.mark.parametrize("key", [True, False], ids=["keyed", "keyless"])
def test_vacuum_full_or_optimize_reloads_nothing(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path, key: bool
) -> None:
    hook, staged = loaded(any_db, moto_server, s3_bucket, source, key=key)
    if any_db.engine == "postgres":
        any_db.query("VACUUM FULL notes")
        any_db.query("CLUSTER notes USING notes_pkey") if key else None
    else:
        any_db.query("OPTIMIZE TABLE notes")

    again = run_load(hook, staged)

    assert all(r.skipped for r in again)
    assert ids(any_db) == list(range(1, ROWS + 1))


def test_keyless_table_truncated_loads_again(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path
) -> None:
    hook, staged = loaded(any_db, moto_server, s3_bucket, source, key=False)
    any_db.query("TRUNCATE TABLE notes")

    run_load(hook, staged)

    assert ids(any_db) == list(range(1, ROWS + 1))


def test_keyless_table_rebuilt_with_rows_missing_is_refused(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path
) -> None:
    hook, staged = loaded(any_db, moto_server, s3_bucket, source, key=False)
    any_db.query("DELETE FROM notes WHERE id <= 10")
    any_db.query("VACUUM FULL notes" if any_db.engine == "postgres" else "OPTIMIZE TABLE notes")

    with pytest.raises(BulkLoadError, match=rf"holds {ROWS - 10} rows, fewer than the {ROWS}"):
        hook.reconcile("notes", staged.manifest_uri)


def test_report_fails_when_the_table_lost_rows_after_loading(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path
) -> None:
    create_notes(any_db)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    staged = stage_input(moto_server, s3_bucket, source)
    hook.reconcile("notes", staged.manifest_uri)
    for chunk in staged.manifest.chunks:
        hook.load_chunk("notes", chunk)
    last = staged.manifest.chunks[-1]
    any_db.query(f"DELETE FROM notes WHERE id >= {int(last.first_key[0])}")  # type: ignore[index]

    with pytest.raises(LoadVerificationError) as failure:
        hook.verify_load("notes", staged.manifest_uri)
    message = str(failure.value)
    assert f"expected {ROWS} rows" in message
    assert last.uri in message


def test_second_input_for_a_loaded_date_is_refused_unless_reload(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    create_notes(any_db)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    everything = tmp_path / "all.csv"
    everything.write_text(rows(1, 800))
    run_load(hook, stage_input(moto_server, s3_bucket, everything))
    one_file = tmp_path / "part.csv"
    one_file.write_text(rows(1, 200))
    partial = stage_input(moto_server, s3_bucket, one_file)

    with pytest.raises(InputAlreadyLoadedError, match="reload"):
        run_load(hook, partial)
    assert ids(any_db) == list(range(1, 801))  # nothing taken out

    run_load(hook, partial, reload=True)
    assert ids(any_db) == list(range(1, 201))
    # the replaced input is gone from the ledger too: loading it again is a new load, once
    run_load(hook, stage_input(moto_server, s3_bucket, everything), reload=True)
    assert ids(any_db) == list(range(1, 801))


def test_a_date_rerun_after_a_later_date_loaded_verifies_green(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Date A loads into an empty table, date B after it; clearing A (a re-run) must not count
    B's rows against A's input: the table held only A's rows once, not any more."""
    create_notes(any_db)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(rows(1, 400))
    b.write_text(rows(401, 700))
    staged_a = stage_input(moto_server, s3_bucket, a, run="2026-11-20")
    run_load(hook, staged_a)
    run_load(hook, stage_input(moto_server, s3_bucket, b, run="2026-11-21"))

    again = run_load(hook, staged_a)

    assert all(r.skipped for r in again)
    assert ids(any_db) == list(range(1, 701))
    # and once A's own rows go missing, the re-run puts them back and verifies green again
    any_db.query("DELETE FROM notes WHERE id <= 400")
    assert not any(r.skipped for r in run_load(hook, staged_a))
    assert ids(any_db) == list(range(1, 701))


def test_a_failed_first_attempt_rerun_after_another_date_verifies_green(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """A's first attempt committed part of its chunks into an empty table and stopped; B loaded;
    A's re-run loads the rest and its report checks A's chunks, not the whole table's count."""
    create_notes(any_db)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(rows(1, 400))
    b.write_text(rows(401, 700))
    staged_a = stage_input(moto_server, s3_bucket, a, run="2026-11-20")
    hook.reconcile("notes", staged_a.manifest_uri, load_id="test/run")
    hook.load_chunk("notes", staged_a.manifest.chunks[0], load_id="test/run")
    run_load(hook, stage_input(moto_server, s3_bucket, b, run="2026-11-21"))

    run_load(hook, staged_a)

    assert ids(any_db) == list(range(1, 701))


def test_rows_of_another_date_are_never_withdrawn(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Date A loads 1..400; date B's first input overlaps (301..700) and loads while the primary
    key is dropped (as prepare_table did before); B's corrected input must not take A's rows."""
    create_notes(pg_db)
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    a = tmp_path / "a.csv"
    a.write_text(rows(1, 400))
    run_load(hook, stage_input(moto_server, s3_bucket, a, run="2026-11-20"))
    b = tmp_path / "b.csv"
    b.write_text(rows(301, 700))
    first_b = stage_input(moto_server, s3_bucket, b, run="2026-11-21")
    pg_db.query("ALTER TABLE notes DROP CONSTRAINT notes_pkey")
    hook.reconcile("notes", first_b.manifest_uri)
    for chunk in first_b.manifest.chunks:
        hook.load_chunk("notes", chunk)
    b.write_text(rows(401, 700))
    corrected = stage_input(moto_server, s3_bucket, b, run="2026-11-21")

    with pytest.raises(WithdrawMismatchError, match="would delete"):
        hook.reconcile("notes", corrected.manifest_uri)
    # nothing was deleted: A's rows are all there (with B's duplicates, for a person to decide)
    assert pg_db.query("SELECT count(DISTINCT id), count(*) FROM notes") == [(700, 800)]


def test_a_chunk_rewritten_in_s3_after_staging_is_not_loaded(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path
) -> None:
    create_notes(any_db)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    staged = stage_input(moto_server, s3_bucket, source)
    chunk = staged.manifest.chunks[0]
    s3 = moto_server.client("s3")
    original = gzip.decompress(s3.get_object(Bucket=chunk.bucket, Key=chunk.key)["Body"].read())
    forged = original.replace(b"note 1\n", b"forged\n", 1)
    assert forged != original
    s3.put_object(Bucket=chunk.bucket, Key=chunk.key, Body=gzip.compress(forged))

    with pytest.raises(ChunkLoadError, match="changed after staging"):
        hook.load_chunk("notes", chunk)
    assert ids(any_db) == []


def test_same_input_loaded_by_another_dag_into_a_keyless_table_is_warned(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path
) -> None:
    create_notes(pg_db, key=False)
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    run_load(hook, stage_input(moto_server, s3_bucket, source, key=False, dag_id="old_name"))
    renamed = stage_input(moto_server, s3_bucket, source, key=False, dag_id="new_name")

    warnings = hook.reconcile("notes", renamed.manifest_uri).warnings
    assert len(warnings) == 1
    assert "same input" in warnings[0]
    assert "old_name" in warnings[0]


def test_a_one_megabyte_field_at_a_chunk_edge_stages_and_loads(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """The key of a chunk's first and last record is read with Python's csv module, whose
    default field limit (128 KiB) is far under a valid record's (8 MB)."""
    text = "text" if any_db.engine == "postgres" else "LONGTEXT"
    any_db.query(f"CREATE TABLE notes (id int PRIMARY KEY, note {text})")
    big = "x" * 1_000_000
    source = tmp_path / "big.csv"
    source.write_text(f'2,"{big}"\n1,small\n3,"{big},with, commas"\n')
    staged = stage_input(
        moto_server,
        s3_bucket,
        source,
        chunk_size=500_000,
        sort_key=["id"],
        sort_types=["INTEGER"],
    )
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    run_load(hook, staged)
    assert any_db.query("SELECT id, length(note) FROM notes ORDER BY id") == [
        (1, 5),
        (2, 1_000_000),
        (3, 1_000_013),
    ]


def test_composite_text_and_date_keys_with_awkward_values_are_probed(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    text = "text" if any_db.engine == "postgres" else "VARCHAR(40)"
    any_db.query(
        f"CREATE TABLE notes (day date NOT NULL, code {text} NOT NULL, note {text},"
        " PRIMARY KEY (day, code))"
    )
    awkward = ['a,"b"', "NULL", "ünï", " padded ", "007"]
    source = tmp_path / "k.csv"
    source.write_text(
        "".join(
            f'2026-01-{1 + n % 28:02d},"{awkward[n % 5].replace(chr(34), chr(34) * 2)}{n}",x\n'
            for n in range(400)
        )
    )
    staged = stage_input(
        moto_server, s3_bucket, source, columns=["day", "code", "note"], probe_key=["day", "code"]
    )
    assert all(c.first_key for c in staged.manifest.chunks)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    run_load(hook, staged)
    assert all(r.skipped for r in run_load(hook, staged))  # every probe finds its keys
    any_db.query("TRUNCATE TABLE notes")
    assert not any(r.skipped for r in run_load(hook, staged))
    assert any_db.query("SELECT count(*) FROM notes") == [(400,)]


def test_reload_of_a_keyless_table_emptied_since_loads_it_once(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, source: Path
) -> None:
    """Nothing to take back from an empty table: the reload drops the entries and loads."""
    hook, staged = loaded(any_db, moto_server, s3_bucket, source, key=False)
    any_db.query("TRUNCATE TABLE notes")

    run_load(hook, staged, reload=True)

    assert ids(any_db) == list(range(1, ROWS + 1))


def test_a_keyless_stale_chunk_reloaded_by_two_tasks_at_once_loads_once(
    any_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    source: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hostile review: a keyless table truncated, so a chunk's entry is stale; two tasks load
    that chunk (a zombie and its retry). B found the entry stale and left its transaction; A
    dropped it, loaded the chunk again and recorded a new entry; B then dropped A's entry (same
    key and checksum) without checking it was the stale one, and loaded the chunk a second time:
    every row twice, both tasks green. The first fix compared the entry's load and content,
    which a zombie and its retry share: the entry's time tells them apart. B is held at that
    point (the race, made certain)."""
    import threading

    _, staged = loaded(any_db, moto_server, s3_bucket, source, key=False)
    chunk = staged.manifest.chunks[0]
    any_db.query("TRUNCATE TABLE notes")
    b_waits, b_goes = threading.Event(), threading.Event()
    withdraw_stale = BulkLoadHook._withdraw_stale

    def held(self: BulkLoadHook, *args: Any) -> None:
        if threading.current_thread().name == "B":
            b_waits.set()
            b_goes.wait(60)
        withdraw_stale(self, *args)

    monkeypatch.setattr(BulkLoadHook, "_withdraw_stale", held)
    errors: list[BaseException] = []

    def load_b() -> None:
        try:
            BulkLoadHook(conn_id=any_db.conn_id).load_chunk("notes", chunk, load_id="test/run")
        except BaseException as exc:
            errors.append(exc)

    b = threading.Thread(target=load_b, name="B")
    b.start()
    assert b_waits.wait(60)
    BulkLoadHook(conn_id=any_db.conn_id).load_chunk("notes", chunk, load_id="test/run")
    b_goes.set()
    b.join(60)

    assert errors == []
    assert any_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [
        (chunk.rows, chunk.rows)
    ]
