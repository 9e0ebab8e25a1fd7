"""A corrected input, staged again, never loads the failed attempt's committed chunks twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.exceptions import (
    ChunkLoadError,
    InputAlreadyLoadedError,
    WithdrawChangedRowsError,
    WithdrawMismatchError,
)
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StageResult, StagingOptions, stage
from tests.harness import MotoServer, TestDatabase

GOOD = "".join(f"{i},note {i}\n" for i in range(1, 301))
BAD_ROW = "301,this row is fine\n302,not-a-number-in-an-int-column-follows\nthree,oops\n"
FIXED_ROW = "301,this row is fine\n302,not-a-number-in-an-int-column-follows\n303,fixed\n"


def stage_input(moto: MotoServer, bucket: str, path: Path, run: str = "2026-11-21") -> StageResult:
    return stage(
        str(path),
        s3=moto.client("s3"),
        staging_uri=f"s3://{bucket}/staging",
        dag_id="nightly",
        table="notes",
        run=run,
        options=StagingOptions(
            file_format=FileFormat(header=False),
            columns=["id", "note"],
            chunk_size=1500,
            compression="gzip",
        ),
    )


def stage_rows(
    moto: MotoServer, bucket: str, path: Path, text: str, columns: list[str], **options: Any
) -> StageResult:
    """``text`` (no header) staged for ``notes`` by DAG nightly under date 2026-11-21 (``run``
    and ``dag_id`` override)."""
    path.write_text(text)
    run = options.pop("run", "2026-11-21")
    dag_id = options.pop("dag_id", "nightly")
    options.setdefault("chunk_size", 1500)
    return stage(
        str(path),
        s3=moto.client("s3"),
        staging_uri=f"s3://{bucket}/staging",
        dag_id=dag_id,
        table="notes",
        run=run,
        options=StagingOptions(file_format=FileFormat(header=False), columns=columns, **options),
    )


def load_all(hook: BulkLoadHook, result: StageResult) -> None:
    """What a run does: reconcile (the withdraw_superseded task records the load), then load."""
    hook.reconcile("notes", result.manifest_uri)
    for chunk in result.manifest.chunks:
        hook.load_chunk("notes", chunk)


def create_notes(db: TestDatabase, *, primary_key: bool = True) -> None:
    key = " PRIMARY KEY" if primary_key else ""
    text = "text" if db.engine == "postgres" else "VARCHAR(100)"
    db.query(f"CREATE TABLE notes (id int{key}, note {text})")


def failed_then_corrected(
    db: TestDatabase, moto: MotoServer, bucket: str, tmp_path: Path
) -> tuple[int, StageResult]:
    """A load of ``notes`` that fails on a bad row after its first chunks committed, and the
    corrected input staged again: the rows the failed attempt left, and the new staging."""
    create_notes(db)
    source = tmp_path / "notes.csv"
    source.write_text(GOOD + BAD_ROW)
    first = stage_input(moto, bucket, source)
    assert len(first.manifest.chunks) > 2
    with pytest.raises(ChunkLoadError):
        # the last chunk holds the bad row: the ones before it committed
        load_all(BulkLoadHook(conn_id=db.conn_id), first)
    committed = db.query("SELECT count(*) FROM notes")[0][0]
    assert 0 < committed < 300
    source.write_text(GOOD + FIXED_ROW)
    second = stage_input(moto, bucket, source)
    assert second.prefix != first.prefix
    return committed, second


def test_corrected_input_takes_back_the_failed_attempts_chunks(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    committed, second = failed_then_corrected(any_db, moto_server, s3_bucket, tmp_path)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    taken_back = hook.withdraw_superseded_chunks("notes", second.manifest_uri)
    assert sum(r.rows for r in taken_back) == committed
    assert any_db.query("SELECT count(*) FROM notes")[0][0] == 0
    load_all(hook, second)

    ids = [r[0] for r in any_db.query("SELECT id FROM notes ORDER BY id")]
    assert ids == list(range(1, 304))
    assert hook.withdraw_superseded_chunks("notes", second.manifest_uri) == []


def test_rows_already_in_the_table_before_the_load_are_kept(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    create_notes(pg_db)
    pg_db.query("INSERT INTO notes VALUES (5000, 'from yesterday')")
    source = tmp_path / "notes.csv"
    source.write_text(GOOD)
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    load_all(hook, stage_input(moto_server, s3_bucket, source))
    source.write_text(GOOD + "301,late arrival\n")
    second = stage_input(moto_server, s3_bucket, source)

    hook.withdraw_superseded_chunks("notes", second.manifest_uri)
    load_all(hook, second)

    assert pg_db.query("SELECT count(*), min(id), max(id) FROM notes") == [(302, 1, 5000)]


def test_a_table_without_primary_key_takes_back_the_rows_by_every_column(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    create_notes(any_db, primary_key=False)
    any_db.query("INSERT INTO notes VALUES (NULL, 'typed in by hand'), (5000, NULL)")
    source = tmp_path / "notes.csv"
    source.write_text(GOOD + ",no id\n")
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    load_all(hook, stage_input(moto_server, s3_bucket, source))
    source.write_text(GOOD + ",no id\n301,late arrival\n")
    second = stage_input(moto_server, s3_bucket, source)

    taken_back = hook.withdraw_superseded_chunks("notes", second.manifest_uri)
    load_all(hook, second)

    assert sum(r.rows for r in taken_back) == 301
    assert any_db.query("SELECT count(*), count(id), count(DISTINCT id) FROM notes") == [
        (304, 302, 302)
    ]


def test_a_table_without_primary_key_keeps_another_loads_identical_rows(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Rows of another load equal to the chunk's, column for column: the delete would take more
    rows than the chunk loaded, so nothing is deleted."""
    create_notes(any_db, primary_key=False)
    source = tmp_path / "notes.csv"
    source.write_text(GOOD)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    load_all(hook, stage_input(moto_server, s3_bucket, source))
    any_db.query("INSERT INTO notes VALUES (7, 'note 7')")
    source.write_text(GOOD + "301,late arrival\n")
    second = stage_input(moto_server, s3_bucket, source)

    with pytest.raises(WithdrawMismatchError, match=r"would delete \d+ rows"):
        hook.withdraw_superseded_chunks("notes", second.manifest_uri)
    assert any_db.query("SELECT count(*) FROM notes") == [(301,)]


def test_rows_changed_since_the_chunk_loaded_are_not_taken_back(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """A row with the chunk's key but other values (another load re-delivered it, or someone
    edited it) is not the chunk's row: reloading the chunk would overwrite it."""
    create_notes(any_db)
    source = tmp_path / "notes.csv"
    source.write_text(GOOD)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    load_all(hook, stage_input(moto_server, s3_bucket, source))
    any_db.query("UPDATE notes SET note = 'edited' WHERE id = 7")
    source.write_text(GOOD + "301,late arrival\n")
    second = stage_input(moto_server, s3_bucket, source)

    with pytest.raises(WithdrawChangedRowsError, match=r"\(id\) = \(7\)"):
        hook.withdraw_superseded_chunks("notes", second.manifest_uri)
    assert any_db.query("SELECT count(*) FROM notes") == [(300,)]
    assert any_db.query("SELECT note FROM notes WHERE id = 7") == [("edited",)]


def loaded_without_record_then_changed(
    db: TestDatabase, moto: MotoServer, bucket: str, tmp_path: Path
) -> StageResult:
    """300 rows of ``notes`` loaded chunk by chunk with no load record, then a second input for
    the same date (one row more) staged: the new staging."""
    create_notes(db)
    source = tmp_path / "notes.csv"
    source.write_text(GOOD)
    hook = BulkLoadHook(conn_id=db.conn_id)
    for chunk in stage_input(moto, bucket, source).manifest.chunks:
        hook.load_chunk("notes", chunk)
    source.write_text(GOOD + "301,late arrival\n")
    return stage_input(moto, bucket, source)


def test_chunks_with_no_load_record_are_not_taken_back_without_reload(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Chunks committed with no record of their load (a ledger of an earlier release) may be a
    complete load of the date: another input does not replace them unless asked."""
    second = loaded_without_record_then_changed(pg_db, moto_server, s3_bucket, tmp_path)
    hook = BulkLoadHook(conn_id=pg_db.conn_id)

    with pytest.raises(InputAlreadyLoadedError, match=r"no record of whether.*reload=True"):
        hook.withdraw_superseded_chunks("notes", second.manifest_uri)
    assert pg_db.query("SELECT count(*) FROM notes") == [(300,)]

    hook.reconcile("notes", second.manifest_uri, reload=True)
    load_all(hook, second)
    assert pg_db.query("SELECT count(*), max(id) FROM notes") == [(301, 301)]


def rows_and_ledger(db: TestDatabase) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    ledger = (
        "SELECT chunk_key, rows FROM bulkload.chunk_ledger ORDER BY chunk_key"
        if db.engine == "postgres"
        else "SELECT chunk_key, row_count FROM bulkload_chunk_ledger ORDER BY chunk_key"
    )
    return sorted(db.query("SELECT * FROM notes")), db.query(ledger)


@pytest.mark.parametrize("primary_key", [True, False], ids=["key", "keyless"])
def test_a_reload_refused_by_its_last_chunk_takes_no_chunk_out(
    any_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    tmp_path: Path,
    primary_key: bool,
) -> None:
    """Hostile review: a reload whose last chunk cannot go (a row edited since it loaded; on a
    keyless table, an identical row another load added) took the chunks before it out, each
    committed, and left the date half withdrawn. Every chunk now goes in one transaction."""
    create_notes(any_db, primary_key=primary_key)
    source = tmp_path / "notes.csv"
    source.write_text(GOOD)
    staged = stage_input(moto_server, s3_bucket, source)
    assert len(staged.manifest.chunks) > 2
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    load_all(hook, staged)
    if primary_key:
        any_db.query("UPDATE notes SET note = 'edited by an app' WHERE id = 300")
        refusal: type[Exception] = WithdrawChangedRowsError
    else:
        any_db.query("INSERT INTO notes VALUES (300, 'note 300')")
        refusal = WithdrawMismatchError
    before = rows_and_ledger(any_db)

    with pytest.raises(refusal) as failure:
        hook.reconcile("notes", staged.manifest_uri, reload=True)
    assert "nothing was taken out" in " ".join(getattr(failure.value, "__notes__", []))
    assert rows_and_ledger(any_db) == before


def test_a_keyless_reload_with_a_row_repeated_in_two_chunks_takes_both_out(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Hostile review: a keyless table, one row repeated in the first and the last chunk. Each
    chunk's delete matches every equal row, so the first took both copies and its exact count
    refused the reload, every time. Matched on every column, the chunks' count is checked
    together now."""
    create_notes(any_db, primary_key=False)
    source = tmp_path / "notes.csv"
    source.write_text("7,repeated\n" + GOOD + "7,repeated\n")
    staged = stage_input(moto_server, s3_bucket, source)
    assert len(staged.manifest.chunks) > 2
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    load_all(hook, staged)

    taken = hook.reconcile("notes", staged.manifest_uri, reload=True).withdrawn
    assert sum(r.rows for r in taken) == 302
    load_all(hook, staged)
    assert any_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(302, 300)]


def test_a_keyless_reload_of_an_input_loaded_under_two_dates_replaces_both(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Hostile review: the same input (same fingerprint) loaded under a date and under the date
    with a time of day; a reload takes both copies out (the chunks of the other date go too),
    but each chunk's delete matched both copies and refused ("would delete 224 rows")."""
    create_notes(any_db, primary_key=False)
    source = tmp_path / "notes.csv"
    source.write_text(GOOD)  # once: the same file, so the same input (fingerprint) twice
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    for run in ("2026-11-21", "2026-11-21T10:00:00"):
        staged = stage_input(moto_server, s3_bucket, source, run=run)
        load_all(hook, staged)
    assert any_db.query("SELECT count(*) FROM notes") == [(600,)]

    hook.reconcile("notes", staged.manifest_uri, reload=True)
    load_all(hook, staged)
    assert any_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(300, 300)]


def test_a_keyless_reload_keeps_an_on_update_timestamp_the_input_carries(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Hostile review: ``CREATE … SELECT`` copies ``ON UPDATE CURRENT_TIMESTAMP`` into the
    scratch table, and its CRC32 ``UPDATE`` then set the chunk's timestamps to now: no row
    matched, and every withdraw of such a keyless table was refused ("would delete 0 rows")."""
    mysql_db.query(
        "CREATE TABLE notes (id int, note VARCHAR(100), ts TIMESTAMP NOT NULL"
        " DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP)"
    )
    text = "".join(f"{i},note {i},2020-01-01 00:00:0{i % 10}\n" for i in range(1, 301))
    staged = stage_rows(moto_server, s3_bucket, tmp_path / "notes.csv", text, ["id", "note", "ts"])
    hook = BulkLoadHook(conn_id=mysql_db.conn_id)
    load_all(hook, staged)

    taken = hook.reconcile("notes", staged.manifest_uri, reload=True).withdrawn
    assert sum(r.rows for r in taken) == 300
    load_all(hook, staged)
    assert mysql_db.query("SELECT count(*), count(DISTINCT id), min(ts) FROM notes")[0][:2] == (
        300,
        300,
    )


@pytest.mark.parametrize("primary_key", [True, False], ids=["key", "keyless"])
def test_two_reloads_at_once_never_take_a_chunk_out_twice(
    any_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    tmp_path: Path,
    primary_key: bool,
) -> None:
    """Hostile review: two reloads of one date at once (the hook, or the standalone withdraw
    operator, which takes no table claim). On MySQL both used one scratch table and dropped it
    under each other; a withdraw that waited for the other's claims went on with the ledger
    entries it had read before, deleting rows the other had just loaded again. Now each
    session has its own scratch table, and a withdraw whose entries changed while it waited
    refuses with nothing taken out; the table holds every row once."""
    import threading

    create_notes(any_db, primary_key=primary_key)
    source = tmp_path / "notes.csv"
    source.write_text(GOOD)
    staged = stage_input(moto_server, s3_bucket, source)
    load_all(BulkLoadHook(conn_id=any_db.conn_id), staged)
    errors: list[BaseException] = []

    def reload(load_id: str) -> None:
        try:
            hook = BulkLoadHook(conn_id=any_db.conn_id)
            hook.reconcile("notes", staged.manifest_uri, reload=True, load_id=load_id)
            for chunk in staged.manifest.chunks:
                hook.load_chunk("notes", chunk, load_id=load_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reload, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(errors) <= 1, errors
    for error in errors:
        assert "while this withdraw waited for its claim" in str(error), error
        assert "nothing was taken out" in " ".join(getattr(error, "__notes__", []))
    assert any_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(300, 300)]
    if any_db.engine == "mysql":
        assert (
            any_db.query(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = DATABASE() AND table_name LIKE 'bulkload_withdraw%'"
            )
            == []
        )


def test_a_keyless_reload_never_takes_an_equal_row_of_a_date_loaded_since_a_truncate(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Hostile review: a keyless table; date 1 loads three rows, the table is truncated, date 2
    loads one row equal to one of date 1's; then date 1 reloads. Its withdraw deleted date 2's
    row (one of three: fewer, but the table ended empty, which was accepted) and the reload's
    report said verified. By the ledger, date 2 has rows in the table: refused."""
    create_notes(any_db, primary_key=False)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    staged = {}
    for run, body in (("2026-11-21", "1,x\n2,y\n3,z\n"), ("2026-11-22", "1,x\n")):
        source = tmp_path / f"{run}.csv"
        staged[run] = stage_rows(moto_server, s3_bucket, source, body, ["id", "note"], run=run)
        load_all(hook, staged[run])
        if run == "2026-11-21":
            any_db.query("TRUNCATE TABLE notes")
    before = rows_and_ledger(any_db)

    with pytest.raises(WithdrawMismatchError, match=r"would delete 1 rows.*loaded 3"):
        hook.reconcile("notes", staged["2026-11-21"].manifest_uri, reload=True)
    assert rows_and_ledger(any_db) == before


@pytest.mark.parametrize("another_load", [False, True], ids=["only-this-input", "another-load"])
def test_a_keyless_reload_after_rows_were_deleted_by_hand(
    any_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    tmp_path: Path,
    another_load: bool,
) -> None:
    """Matched on every column, the chunks take out fewer rows than they loaded: accepted only
    when that empties a table no other load (by the ledger) has rows in; then every row left
    was theirs, and the reload puts each back once. With another load's rows in the ledger, an
    equal row of it could have stood in for a deleted one: refused, nothing taken out."""
    create_notes(any_db, primary_key=False)
    source = tmp_path / "notes.csv"
    source.write_text(GOOD)
    staged = stage_input(moto_server, s3_bucket, source)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    load_all(hook, staged)
    if another_load:  # another DAG's input, its rows in the ledger, since deleted by hand too
        other = tmp_path / "other.csv"
        another = stage_rows(
            moto_server, s3_bucket, other, "5000,another dag\n", ["id", "note"], dag_id="another"
        )
        load_all(hook, another)
        any_db.query("DELETE FROM notes WHERE id = 5000")
    any_db.query("DELETE FROM notes WHERE id <= 10")
    before = rows_and_ledger(any_db)

    if another_load:
        with pytest.raises(WithdrawMismatchError, match=r"would delete 290 rows.*loaded 300"):
            hook.reconcile("notes", staged.manifest_uri, reload=True)
        assert rows_and_ledger(any_db) == before
        return
    taken = hook.reconcile("notes", staged.manifest_uri, reload=True).withdrawn
    assert sum(r.rows for r in taken) == 290
    load_all(hook, staged)
    assert any_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(300, 300)]


def test_a_reload_whose_timestamp_keys_read_otherwise_now_is_refused(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Hostile review: a table keyed on a ``timestamptz`` loaded from times without an offset;
    the session time zone changed before a reload. The chunks, read again, became other
    instants: the withdraw deleted none of the date's rows, a reload accepts fewer, and the
    load added all 300 again, green. The chunk's first and last key (as stored) still in the
    table after its delete now refuse it."""
    pg_db.query("CREATE TABLE notes (id int NOT NULL, ts timestamptz PRIMARY KEY)")
    text = "".join(f"{i},2020-01-01 {i // 60:02d}:{i % 60:02d}:00\n" for i in range(300))
    staged = stage_rows(
        moto_server, s3_bucket, tmp_path / "n.csv", text, ["id", "ts"], probe_key=["ts"]
    )
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    load_all(hook, staged)
    pg_db.query(f"ALTER DATABASE {pg_db.name} SET timezone = 'Asia/Tokyo'")
    before = rows_and_ledger(pg_db)

    with pytest.raises(WithdrawMismatchError, match="does not hold the keys it loaded"):
        BulkLoadHook(conn_id=pg_db.conn_id).reconcile("notes", staged.manifest_uri, reload=True)
    assert rows_and_ledger(pg_db) == before


@pytest.mark.parametrize("column", ["f", "F"])
def test_a_keyless_reload_tells_float_values_apart_past_six_digits(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path, column: str
) -> None:
    """Hostile review: MySQL renders a FLOAT with 6 significant digits, so 0.1234567 and
    0.1234568 compared equal: with date A's row deleted by hand, A's reload took date B's row
    instead (the count matched) and the run was green. FLOATs now compare as DOUBLEs, also
    when the table spells the column ``F`` and the input ``f`` (the first fix looked it up by
    the chunk's spelling; MySQL's column names ignore case)."""
    mysql_db.query(f"CREATE TABLE notes (id int, {column} FLOAT)")
    hook = BulkLoadHook(conn_id=mysql_db.conn_id)
    a = "1,0.1234567\n" + "".join(f"{i},{i}.5\n" for i in range(2, 200))
    staged = stage_rows(moto_server, s3_bucket, tmp_path / "a.csv", a, ["id", "f"])
    load_all(hook, staged)
    other = stage_rows(
        moto_server, s3_bucket, tmp_path / "b.csv", "1,0.1234568\n", ["id", "f"], run="2026-11-22"
    )
    load_all(hook, other)
    mysql_db.query("DELETE FROM notes WHERE id = 1 AND f < 0.12345675")
    before = rows_and_ledger(mysql_db)

    with pytest.raises(WithdrawMismatchError, match=r"would delete 198 rows.*loaded 199"):
        hook.reconcile("notes", staged.manifest_uri, reload=True)
    assert rows_and_ledger(mysql_db) == before


@pytest.mark.parametrize("column_type", ["VARCHAR(100)", "INT"])
def test_a_keyless_table_with_a_column_named_like_the_checksum_reloads(
    mysql_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    tmp_path: Path,
    column_type: str,
) -> None:
    """Hostile review: a keyless table's own ``bulkload_row_crc`` column clashed with the
    scratch table's checksum column, and every reload was refused."""
    mysql_db.query(f"CREATE TABLE notes (id int, BULKLOAD_ROW_CRC {column_type})")
    text = "".join(f"{i},{i * 7}\n" for i in range(1, 301))
    staged = stage_rows(
        moto_server, s3_bucket, tmp_path / "n.csv", text, ["id", "BULKLOAD_ROW_CRC"]
    )
    hook = BulkLoadHook(conn_id=mysql_db.conn_id)
    load_all(hook, staged)
    hook.reconcile("notes", staged.manifest_uri, reload=True)
    load_all(hook, staged)
    assert mysql_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(300, 300)]


def test_a_reload_keyed_on_a_unique_key_with_nulls_leaves_each_row_once(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """A probe key over nullable columns (a UNIQUE (a, b) with b nullable): a row whose b is
    NULL matches nothing by ``=``, so a reload by that key left it, and loaded it again (the
    unique index admits it). Such a key is not used to withdraw: every column is. And a chunk
    whose first or last key holds a NULL failed its first load (PostgreSQL: the NULL read as
    the text "NULL") or its report (MySQL): such a chunk keeps no probe."""
    text_type = "text" if any_db.engine == "postgres" else "VARCHAR(100)"
    any_db.query(f"CREATE TABLE notes (a int NOT NULL, b int, note {text_type}, UNIQUE (a, b))")
    text = "".join(f"{i},{'' if i % 2 == 0 else i},n{i}\n" for i in range(1, 301))
    staged = stage_rows(
        moto_server,
        s3_bucket,
        tmp_path / "n.csv",
        text,
        ["a", "b", "note"],
        probe_key=["a", "b"],
        chunk_size=600,
    )
    edges = [k for c in staged.manifest.chunks for k in (c.first_key, c.last_key)]
    assert any(k is not None and k[1] in ("", None, "NULL", "\\N") for k in edges), edges
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    load_all(hook, staged)
    assert hook.verify_load("notes", staged.manifest_uri)["verified"]
    hook.reconcile("notes", staged.manifest_uri, reload=True)
    load_all(hook, staged)
    assert any_db.query("SELECT count(*), count(DISTINCT a) FROM notes") == [(300, 300)]
    assert hook.verify_load("notes", staged.manifest_uri)["verified"]


def test_a_reload_after_a_datestyle_change_takes_the_rows_it_finds(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Hostile review: a ``date`` key loaded under ``DateStyle = SQL, DMY`` keeps its probe as
    ``dd/mm/yyyy``; reloaded under ISO, the input reads the same and every row is found. The
    first version of the probe check looked the probe up anyway and refused (the text read as
    another date, or not at all). It now looks only when fewer rows went than loaded."""
    import datetime as dt

    pg_db.query("CREATE TABLE notes (d date PRIMARY KEY, note text)")
    days = [dt.date(y, m, d) for y in (2020, 2021) for m in range(1, 13) for d in range(1, 13)]
    text = "".join(f"{day},n{i}\n" for i, day in enumerate(days))
    staged = stage_rows(
        moto_server,
        s3_bucket,
        tmp_path / "n.csv",
        text,
        ["d", "note"],
        probe_key=["d"],
        chunk_size=300,
    )
    pg_db.query(f"ALTER DATABASE {pg_db.name} SET DateStyle = 'SQL, DMY'")
    load_all(BulkLoadHook(conn_id=pg_db.conn_id), staged)
    pg_db.query(f"ALTER DATABASE {pg_db.name} SET DateStyle = 'ISO, MDY'")
    first = sorted(pg_db.query("SELECT * FROM notes"))

    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    taken = hook.reconcile("notes", staged.manifest_uri, reload=True).withdrawn
    assert sum(r.rows for r in taken) == len(days)
    load_all(hook, staged)
    assert sorted(pg_db.query("SELECT * FROM notes")) == first


def test_a_text_key_that_reads_like_the_null_marker_keeps_its_probe(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Hostile review: a NOT NULL text key whose chunk starts with the text ``NULL`` (the staged
    files' NULL marker) kept no probe, so with that chunk's rows deleted by hand, and another
    date's rows in the table, a re-run skipped it and the report was green over 54 missing
    rows. A NULL marker drops the probe only in a column that may hold NULL."""
    text_type = "text" if any_db.engine == "postgres" else "VARCHAR(20)"
    any_db.query(f"CREATE TABLE notes (k {text_type} NOT NULL PRIMARY KEY, note {text_type})")
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    other = "".join(f"zz{i:03d},b\n" for i in range(100))
    load_all(
        hook,
        stage_rows(
            moto_server, s3_bucket, tmp_path / "b.csv", other, ["k", "note"], run="2026-11-20"
        ),
    )
    text = '"NULL",edge\n' + "".join(f"k{i:04d},n{i}\n" for i in range(1, 300))
    staged = stage_rows(
        moto_server,
        s3_bucket,
        tmp_path / "a.csv",
        text,
        ["k", "note"],
        probe_key=["k"],
        chunk_size=600,
    )
    first = staged.manifest.chunks[0]
    load_all(hook, staged)
    any_db.query(
        "DELETE FROM notes WHERE k = 'NULL' OR (k >= 'k' AND k <= %s)", (first.last_key[0],)
    )

    load_all(hook, staged)  # the same input again, no reload
    assert any_db.query("SELECT count(*) FROM notes WHERE k NOT LIKE 'zz%%'") == [(300,)]
    assert hook.verify_load("notes", staged.manifest_uri)["verified"]
