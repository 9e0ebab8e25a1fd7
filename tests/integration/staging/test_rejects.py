"""max_errors: records that do not read as the input's format are set aside, listed, counted.

Loaded through both engines: the good rows load exactly, the rejects file names each set-aside
record's file, line and reason, over the threshold nothing is staged, and a quote that never
closes always fails.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.groups import collect_groups, stage_group
from airflow_bulkload.staging.normalize import InputFormatError
from airflow_bulkload.staging.stager import StageResult
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import stage_input

GOOD = 2000


def body(bad: dict[int, bytes], rows: int = GOOD) -> bytes:
    """``rows`` good records ``i,note i,i``, with ``bad`` records inserted before record ``i``."""
    out = [b"id,note,n\n"]
    for i in range(1, rows + 1):
        if i in bad:
            out.append(bad[i])
        out.append(b"%d,note %d,%d\n" % (i, i, i))
    return b"".join(out)


#: a record with too few fields, one with too many, one that is not UTF-8
BAD = {
    100: b"900001,too few\n",
    1000: b"900002,too,many,fields\n",
    1500: b"900003,caf\xe9 in latin-1,3\n",
}


def put(moto: MotoServer, bucket: str, key: str, data: bytes) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=data)


def plan(
    moto: MotoServer, bucket: str, group_bytes: int | None = None, **options: Any
) -> StageResult:
    defaults = {"chunk_size": 20_000, "probe_key": ["id"]}
    return stage_input(moto, bucket, group_bytes=group_bytes, **(defaults | options))


def load(db: TestDatabase, staged: StageResult) -> dict[str, Any]:
    assert staged.manifest is not None
    hook = BulkLoadHook(conn_id=db.conn_id)
    hook.reconcile("notes", staged.manifest_uri, load_id="t")
    for chunk in staged.manifest.chunks:
        hook.load_chunk("notes", chunk, load_id="t")
    return hook.verify_load("notes", staged.manifest_uri, load_id="t")


def create_notes(db: TestDatabase) -> None:
    db.query("CREATE TABLE notes (id int PRIMARY KEY, note text, n int)")


def read_rejects(moto: MotoServer, uri: str) -> list[dict[str, str]]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    text = moto.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_records_that_do_not_parse_are_set_aside_listed_and_the_rest_load_exactly(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_notes(any_db)
    put(moto_server, s3_bucket, "in/export.csv", body(BAD))

    staged = plan(moto_server, s3_bucket, max_errors=5, direct=True)
    verification = load(any_db, staged)

    assert staged.manifest is not None and staged.manifest.rejected_rows == 3
    assert not any(c.uri.endswith("export.csv") for c in staged.manifest.chunks)  # staged
    assert any_db.query("SELECT count(*), sum(id), max(id) FROM notes") == [
        (GOOD, GOOD * (GOOD + 1) // 2, GOOD)
    ]
    assert verification["rejected_rows"] == 3 and verification["rejects"] == staged.manifest.rejects
    rows = read_rejects(moto_server, staged.manifest.rejects[0])
    where = f"s3://{s3_bucket}/in/export.csv"
    # lines count from the header's line 1: record i stands on line i + 1, plus the bad ones before
    assert [(r["source"], int(r["line"]), r["error"]) for r in rows] == [
        (where, 101, "MISSING COLUMNS"),
        (where, 1002, "TOO MANY COLUMNS"),
        (where, 1503, "INVALID ENCODING"),
    ]
    assert rows[0]["record"] == "900001,too few"


def test_over_max_errors_nothing_is_staged_and_the_first_rejects_are_named(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    put(moto_server, s3_bucket, "in/export.csv", body(BAD))

    with pytest.raises(
        InputFormatError, match=r"3 records .* more than max_errors \(2\).*line 101"
    ):
        plan(moto_server, s3_bucket, max_errors=2)
    listed = moto_server.client("s3").list_objects_v2(Bucket=s3_bucket, Prefix="staging/")
    assert "Contents" not in listed
    # and without max_errors the first bad record fails staging, as it always did
    with pytest.raises(InputFormatError):
        plan(moto_server, s3_bucket)


@pytest.mark.parametrize(
    ("at", "says"),
    [
        (1900, r"sniffing file .s3://.*/in/export\.csv"),  # within DuckDB's sniffing sample
        (25_000, r"export\.csv, line 25001.*never closes"),  # past it
    ],
)
def test_a_quote_that_never_closes_is_never_set_aside(
    at: int, says: str, moto_server: MotoServer, s3_bucket: str
) -> None:
    """It would take every line after it into one 'record'."""
    put(moto_server, s3_bucket, "in/export.csv", body({at: b'900004,"opened,4\n'}, rows=30_000))

    with pytest.raises(InputFormatError, match=says):
        plan(moto_server, s3_bucket, max_errors=1000)


def test_the_threshold_holds_over_all_staging_groups_and_rejects_go_to_reject_uri(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_notes(pg_db)
    put(moto_server, s3_bucket, "in/a.csv", body({100: BAD[100]}))
    put(moto_server, s3_bucket, "in/b.csv", body({1000: BAD[1000]}))
    s3 = moto_server.client("s3")

    def staged_in_groups(max_errors: int) -> Any:
        planned = plan(
            moto_server,
            s3_bucket,
            group_bytes=40_000,
            max_errors=max_errors,
            reject_uri=f"s3://{s3_bucket}/rejects/2026-11-21/",
        )
        assert len(planned.groups) == 2
        for group in planned.groups:
            stage_group(group, s3=s3)
        return planned

    # each group alone is within 1, the input is not
    planned = staged_in_groups(1)
    with pytest.raises(BulkLoadError, match=r"set aside 2 records .* more than max_errors \(1\)"):
        collect_groups(planned.groups, s3=s3)

    planned = staged_in_groups(2)
    manifest = collect_groups(planned.groups, s3=s3)
    assert manifest.rejected_rows == 2
    # named by their whole staging key in the shared folder: no other input's can replace them
    assert [uri.rsplit(".", 2)[-2:] for uri in manifest.rejects] == [
        ["group-00000-rejects", "csv"],
        ["group-00001-rejects", "csv"],
    ]
    assert all(uri.startswith(f"s3://{s3_bucket}/rejects/2026-11-21/") for uri in manifest.rejects)
    assert [read_rejects(moto_server, uri)[0]["error"] for uri in manifest.rejects] == [
        "MISSING COLUMNS",
        "TOO MANY COLUMNS",
    ]


def test_values_an_integer_column_cannot_take_are_set_aside_with_their_column(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_notes(any_db)
    wrong = {
        10: b"900010,n is text,abc\n",
        20: b'900020,n is a quoted empty string,""\n',
        30: b"not-a-number,id is text,30\n",
        40: b"900040,n is null,\n",  # NULL: kept
        50: b"900050,too few\n",  # a parse error as before, in the same rejects file
    }
    put(moto_server, s3_bucket, "in/export.csv", body(wrong))
    types = {"id": "integer", "note": "text", "n": "int(11)"}

    staged = plan(moto_server, s3_bucket, max_errors=5, table_types=types)
    load(any_db, staged)

    assert staged.manifest is not None and staged.manifest.rejected_rows == 4
    assert any_db.query("SELECT count(*), count(n) FROM notes") == [(GOOD + 1, GOOD)]
    rows = read_rejects(moto_server, staged.manifest.rejects[0])
    assert [(int(r["line"]), r["column"], r["error"]) for r in rows] == [
        (11, "n", "CAST"),
        (22, "n", "CAST"),
        (33, "id", "CAST"),
        (55, "n", "MISSING COLUMNS"),
    ]
    assert rows[0]["record"] == "900010,n is text,abc"

    with pytest.raises(InputFormatError, match=r"4 records .* line 11, column n: CAST"):
        plan(moto_server, s3_bucket, max_errors=3, table_types=types)


def test_without_max_errors_values_are_not_checked_in_staging(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_notes(any_db)
    put(moto_server, s3_bucket, "in/export.csv", body({10: b"900010,n is text,abc\n"}))
    staged = plan(moto_server, s3_bucket, table_types={"id": "integer", "n": "integer"})
    with pytest.raises(BulkLoadError, match="abc"):
        load(any_db, staged)
