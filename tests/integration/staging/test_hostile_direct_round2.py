"""Hostile regression tests, round 2, for loading S3 CSV as stored (direct chunks) and for the
staged path that one-column inputs now take (after e3412b9 / 9766bc0).

The promise under test: a direct load gives exactly the table the same input gives staged
(``direct=False``), or fails before commit with a clear error; planning never refuses what it
could stage, and a load error names the input line that holds the bad record (or no input line
at all), never another one. Each test FAILS on the code as it was when written (commit 9766bc0)
and passes once the break is fixed.
"""

from __future__ import annotations

import pytest

from airflow_bulkload.exceptions import BulkLoadError, ChunkLoadError
from airflow_bulkload.staging.manifest import FileFormat
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import create_and_load, load_staged, stage_checked

HEADER = FileFormat(header=True)


def put(moto: MotoServer, bucket: str, key: str, body: bytes) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def test_a_header_renamed_by_columns_is_not_refused_for_two_cases_of_one_name(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded a CSV whose header is ``id,note,NOTE`` (an export with two
    columns whose names differ only in case) into ``(id, note, extra)``, renaming the header's
    columns by position with ``columns=["id", "note", "extra"]`` (what ``columns`` is for), with
    ``direct`` left to "auto" (here: ``True``).

    What happened: staged (``direct=False``) it loads ``(1, 'a', 'b')``. With direct planning,
    ``plan_direct`` runs ``_refuse_names_in_two_cases`` on the file's header even though
    ``columns`` replaces it, and raises ``InputFormatError`` ("the header names column(s)
    ['NOTE'] twice, in two cases ... Rename them in the file"): not a ``DirectRefusedError``, so
    planning does not fall back to staging and the whole load fails on both engines, for a file
    the loader would never address by those names (``LOAD DATA``/``COPY`` get ``id, note,
    extra``).

    What should happen: the load gives the staged rows (the check applies to the names the loader
    is given, i.e. ``columns`` when set), or the input is staged.
    """
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,NOTE\n1,a,b\n")
    ddl = "id int PRIMARY KEY, note text, extra text"
    columns = ["id", "note", "extra"]

    create_and_load(
        any_db,
        moto_server,
        s3_bucket,
        "staged",
        ddl,
        direct=False,
        file_format=HEADER,
        columns=columns,
    )
    assert any_db.query("SELECT id, note, extra FROM staged") == [(1, "a", "b")]  # the reference

    create_and_load(
        any_db,
        moto_server,
        s3_bucket,
        "direct",
        ddl,
        direct=True,
        file_format=HEADER,
        columns=columns,
    )
    assert any_db.query("SELECT id, note, extra FROM direct") == [(1, "a", "b")]


@pytest.mark.parametrize(
    ("fmt", "body"),
    [(FileFormat(header=False), b"1,a,b\n"), (HEADER, b"c1,c2,c3\n1,a,b\n")],
    ids=["headerless", "header-renamed"],
)
def test_columns_naming_one_column_in_two_cases_never_merge_two_fields_on_mysql(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, fmt: FileFormat, body: bytes
) -> None:
    """What the user did: loaded a three-field CSV into MySQL's ``(id, note)`` with
    ``columns=["id", "note", "NOTE"]`` (headerless, or renaming a header ``c1,c2,c3``), loaded
    as stored (``direct=True``; "auto" does the same when not sorting).

    What happened: staged, the load fails ("read_csv "names" must have unique values. "NOTE" is
    repeated"). Direct, ``_refuse_names_in_two_cases`` only looks at a file's header, never at
    ``columns``: ``LOAD DATA ... (id, note, NOTE)`` runs, MySQL matches column names in any
    case and writes both fields into ``note``; the row commits as ``(1, 'b')`` and the value
    ``a`` is silently dropped (the break e3412b9 fixed for a header, through ``columns``).

    What should happen: the direct load is refused before commit, as for a header naming
    ``note`` in two cases (or as the staged load fails); never a row missing a field.
    """
    put(moto_server, s3_bucket, "in/a.csv", body)

    with pytest.raises(BulkLoadError):
        create_and_load(
            mysql_db,
            moto_server,
            s3_bucket,
            "notes",
            "id int PRIMARY KEY, note text",
            direct=True,
            file_format=fmt,
            columns=["id", "note", "NOTE"],
        )
    assert mysql_db.query("SELECT count(*) FROM notes") == [(0,)]


@pytest.mark.xfail(
    strict=True,
    reason="a record is traced to its input line by content, and Python's csv reads NULL and "
    '"NULL" alike (an empty line as no record): the error names the chunk, the record and the '
    "first line that reads the same",
)
def test_a_null_record_of_a_one_column_input_is_not_traced_to_a_line_holding_text(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded a one-column CSV ``n`` / ``NULL`` / ``x`` / (empty line) /
    ``y`` into ``n varchar(10) NOT NULL``. One-column inputs are always staged now (e3412b9):
    the empty line on line 4 is a record whose one value is NULL (the input's NULL is the empty
    string); line 2 holds the *text* ``NULL``, a valid value.

    What happened: the chunk fails before commit, as it should, but the error says
    ``in/a.csv, line 2``: the tracer reads the staged record back with Python's csv module,
    where the staged chunk's bare ``NULL`` (a NULL) and ``"NULL"`` (text; every value of a
    one-column staged chunk is quoted now) both read as ``NULL``; it then looks that up in the
    input, where an empty line reads as no fields at all (``[]``), so the NULL record can never
    be found, and the first line holding the text ``NULL`` matches instead (a line ``""``
    matches too). The user is sent to a good record. Both engines.

    What should happen: the error names line 4, or no input line (the staged chunk's line
    only, as when nothing is found); never line 2.
    """
    put(moto_server, s3_bucket, "in/a.csv", b"n\nNULL\nx\n\ny\n")

    with pytest.raises(ChunkLoadError) as failure:
        create_and_load(
            any_db,
            moto_server,
            s3_bucket,
            "notes",
            "n varchar(10) NOT NULL",
            direct=True,
            file_format=HEADER,
        )

    assert any_db.query("SELECT count(*) FROM notes") == [(0,)]
    source = f"s3://{s3_bucket}/in/a.csv"
    assert failure.value.source != source or failure.value.line == 4, str(failure.value)


def test_a_one_column_date_loaded_as_stored_before_the_upgrade_loads_nothing_twice(
    pg_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A one-column input loaded as stored by the release before (planning took it direct).
    After the upgrade such input is staged; a re-run finds the manifest it wrote then (the
    fingerprint is the same) and loads as it did; with that manifest gone, it is staged anew,
    under another fingerprint: the run stops as for another input, and ``reload`` stops with
    "manifest is gone" (the old rows cannot be told), the rows once, as troubleshooting.md
    says."""
    from airflow_bulkload.exceptions import InputAlreadyLoadedError
    from airflow_bulkload.hooks import BulkLoadHook
    from airflow_bulkload.staging import direct_planning

    put(moto_server, s3_bucket, "in/a.csv", b"token\nalpha\nbeta\ngamma\n")
    pg_db.query("CREATE TABLE tokens (token text)")
    with monkeypatch.context() as old_release:
        old_release.setattr(direct_planning, "_refuse_one_column", lambda names: None)
        before = stage_checked(pg_db, moto_server, s3_bucket, "tokens", direct=True)
    assert before.manifest is not None and before.manifest.chunks[0].is_direct
    load_staged(pg_db, before, "tokens")
    expected = [("alpha",), ("beta",), ("gamma",)]

    rerun = stage_checked(pg_db, moto_server, s3_bucket, "tokens", direct=True)
    assert rerun.skipped and rerun.manifest_uri == before.manifest_uri
    load_staged(pg_db, rerun, "tokens")
    assert sorted(pg_db.query("SELECT token FROM tokens")) == expected

    bucket, _, key = before.manifest_uri.removeprefix("s3://").partition("/")
    moto_server.client("s3").delete_object(Bucket=bucket, Key=key)
    restaged = stage_checked(pg_db, moto_server, s3_bucket, "tokens", direct=True)
    assert restaged.manifest is not None and not restaged.manifest.chunks[0].is_direct
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    with pytest.raises(InputAlreadyLoadedError):
        hook.reconcile("tokens", restaged.manifest_uri, load_id="t")
    with pytest.raises(BulkLoadError, match="its manifest is gone"):
        hook.reconcile("tokens", restaged.manifest_uri, load_id="t", reload=True)
    assert sorted(pg_db.query("SELECT token FROM tokens")) == expected
