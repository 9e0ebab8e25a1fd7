"""BulkLoadHook.load_chunk into the real PostgreSQL server, chunks served by the moto S3 server."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from airflow_bulkload.exceptions import (
    ChunkConflictError,
    ChunkLoadError,
    InvalidIdentifierError,
    RowCountMismatchError,
)
from airflow_bulkload.hooks import BulkLoadHook
from tests.harness import REPO_ROOT, MotoServer, TestDatabase, put_chunk

ROWS = b'1,alpha,10.5\n2,"beta, with comma",\n3,"gamma ""quoted""",-1\n'
EXPECTED = [(1, "alpha", 10.5), (2, "beta, with comma", None), (3, 'gamma "quoted"', -1.0)]


@pytest.fixture
def items(pg_db: TestDatabase) -> str:
    pg_db.query("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price float8)")
    return "items"


def rows_of(db: TestDatabase, table: str = "items") -> list[tuple[Any, ...]]:
    return db.query(f"SELECT * FROM {table} ORDER BY 1")


def ledger(db: TestDatabase) -> list[tuple[Any, ...]]:
    return db.query("SELECT table_name, chunk_key, rows FROM bulkload.chunk_ledger ORDER BY 2")


@pytest.mark.parametrize("method", ["client", "rds_s3"])
def test_same_chunk_twice_loads_rows_once_and_reports_skipped(
    pg_aws_s3: TestDatabase, moto_server: MotoServer, s3_bucket: str, items: str, method: str
) -> None:
    chunk = put_chunk(moto_server, s3_bucket, "run/items/chunk-0000.csv.gz", ROWS, rows=3)
    hook = BulkLoadHook(conn_id=pg_aws_s3.conn_id)

    first = hook.load_chunk(items, chunk, method=method, load_id="run-1")
    second = hook.load_chunk(items, chunk, method=method, load_id="run-1-retry")

    assert (first.rows, first.skipped) == (3, False)
    assert (second.rows, second.skipped) == (3, True)
    assert rows_of(pg_aws_s3) == EXPECTED
    assert ledger(pg_aws_s3) == [("public.items", "run/items/chunk-0000.csv.gz", 3)]
    assert set(first.to_dict()) >= {"rows", "bytes", "seconds", "skipped", "rows_per_second"}


FORMATS = [
    pytest.param({}, ROWS, EXPECTED, id="csv"),
    pytest.param(
        {"header": True, "null": "NULL", "delimiter": ";", "quote": "'", "escape": "\\"},
        b"id;name;price\n1;alpha;NULL\n2;'b;e\\'ta';2\n3;'NULL';3\n",
        [(1, "alpha", None), (2, "b;e'ta", 2.0), (3, "NULL", 3.0)],
        id="csv-header-quote-escape-null",
    ),
    pytest.param(
        {"format": "text", "delimiter": "\t"},
        b"1\talpha\t\\N\n2\ttab\\there\t2.5\n",
        [(1, "alpha", None), (2, "tab\there", 2.5)],
        id="text",
    ),
    pytest.param(
        {"encoding": "LATIN1"},
        "1,café,1\n".encode("latin-1"),
        [(1, "café", 1.0)],
        id="latin1",
    ),
]


@pytest.mark.parametrize(("file_format", "data", "expected"), FORMATS)
def test_rds_s3_loads_the_same_rows_as_client(
    pg_aws_s3: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    file_format: dict[str, Any],
    data: bytes,
    expected: list[tuple[Any, ...]],
) -> None:
    for table in ("via_client", "via_rds_s3"):
        pg_aws_s3.query(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, price float8)")
    chunk = put_chunk(
        moto_server,
        s3_bucket,
        "run/x/odd key+name (1).gz",
        data,
        rows=len(expected),
        file_format=file_format,
    )
    hook = BulkLoadHook(conn_id=pg_aws_s3.conn_id)
    hook.load_chunk("via_client", chunk, method="client")
    hook.load_chunk("via_rds_s3", chunk, method="rds_s3")
    assert rows_of(pg_aws_s3, "via_client") == expected
    assert rows_of(pg_aws_s3, "via_rds_s3") == expected


def test_columns_subset_in_file_order(
    pg_aws_s3: TestDatabase, moto_server: MotoServer, s3_bucket: str, items: str
) -> None:
    chunk = put_chunk(moto_server, s3_bucket, "c.gz", b"7.5,one,1\n", rows=1)
    BulkLoadHook(conn_id=pg_aws_s3.conn_id).load_chunk(
        items, chunk, method="rds_s3", columns=["price", "name", "id"]
    )
    assert rows_of(pg_aws_s3) == [(1, "one", 7.5)]


BAD_INPUTS = [
    # (id, data, compression, line, column, reason fragment)
    (
        "extra-column",
        b"1,a,1\n2,b,2,extra\n",
        "gzip",
        2,
        None,
        "extra data after last expected column",
    ),
    ("missing-column", b"1,a,1\n2,b\n", "gzip", 2, "price", 'missing data for column "price"'),
    (
        "bad-type",
        b"1,a,1\n2,b,1\n3,c,cheap\n",
        "gzip",
        3,
        "price",
        "invalid input syntax for type double precision",
    ),
    (
        "bad-encoding",
        b"1,a,1\n2,caf\xe9,2\n",
        "gzip",
        2,
        None,
        'invalid byte sequence for encoding "UTF8"',
    ),
    (
        "unterminated-quote",
        b'1,a,1\n2,"open,2\n3,c,3\n',
        "gzip",
        4,  # PostgreSQL counts on to the end of the chunk looking for the closing quote
        None,
        "unterminated CSV quoted field",
    ),
    ("not-null", b"1,,1\n", "gzip", 1, "name", 'null value in column "name"'),
]


@pytest.mark.parametrize("method", ["client", "rds_s3"])
@pytest.mark.parametrize(
    ("data", "compression", "line", "column", "reason"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_INPUTS],
)
def test_bad_rows_fail_with_uri_line_column_and_leave_nothing(
    pg_aws_s3: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    items: str,
    method: str,
    data: bytes,
    compression: str,
    line: int,
    column: str | None,
    reason: str,
) -> None:
    chunk = put_chunk(moto_server, s3_bucket, "run/items/bad.csv.gz", data, compression=compression)
    with pytest.raises(ChunkLoadError) as caught:
        BulkLoadHook(conn_id=pg_aws_s3.conn_id).load_chunk(items, chunk, method=method)
    error = caught.value
    assert error.source == chunk["uri"]
    assert error.line == line
    assert error.column == column
    assert reason in error.reason
    message = str(error)
    assert chunk["uri"] in message and f"line {line}" in message and reason in message
    if column:
        assert f"column {column}" in message
    assert "nothing of this chunk was loaded" in message
    assert rows_of(pg_aws_s3) == []
    assert ledger(pg_aws_s3) == []


def test_header_line_counts_in_the_reported_line(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, items: str
) -> None:
    chunk = put_chunk(
        moto_server,
        s3_bucket,
        "h.gz",
        b"id,name,price\n1,a,1\n2,b,x\n",
        file_format={"header": True},
    )
    with pytest.raises(ChunkLoadError, match=r"line 3, column price"):
        BulkLoadHook(conn_id=pg_db.conn_id).load_chunk(items, chunk)


def test_truncated_gzip_fails_and_leaves_nothing(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, items: str
) -> None:
    data = b"".join(b"%d,name-%d,%d\n" % (i, i, i) for i in range(1, 20001))
    body = gzip.compress(data)
    moto_server.client("s3").put_object(Bucket=s3_bucket, Key="t.gz", Body=body[: len(body) // 2])
    chunk = {"uri": f"s3://{s3_bucket}/t.gz", "checksum": "x", "rows": 20000}
    with pytest.raises(ChunkLoadError, match=r"t\.gz: the gzip stream is corrupt or truncated"):
        BulkLoadHook(conn_id=pg_db.conn_id).load_chunk(items, chunk)
    assert rows_of(pg_db) == [] and ledger(pg_db) == []


@pytest.mark.parametrize("method", ["client", "rds_s3"])
def test_missing_object_fails_with_its_uri(
    pg_aws_s3: TestDatabase, s3_bucket: str, items: str, method: str
) -> None:
    uri = f"s3://{s3_bucket}/run/items/never-staged.csv.gz"
    with pytest.raises(ChunkLoadError) as caught:
        BulkLoadHook(conn_id=pg_aws_s3.conn_id).load_chunk(
            items, {"uri": uri, "checksum": "x"}, method=method
        )
    assert uri in str(caught.value)
    assert rows_of(pg_aws_s3) == [] and ledger(pg_aws_s3) == []


def test_row_count_different_from_the_manifest_fails_and_leaves_nothing(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, items: str
) -> None:
    chunk = put_chunk(moto_server, s3_bucket, "n.gz", ROWS, rows=4)
    with pytest.raises(RowCountMismatchError, match=r"loaded 3 rows.*expected 4 rows"):
        BulkLoadHook(conn_id=pg_db.conn_id).load_chunk(items, chunk)
    assert rows_of(pg_db) == [] and ledger(pg_db) == []


def test_chunk_reloaded_with_a_different_checksum_is_a_conflict(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, items: str
) -> None:
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    hook.load_chunk(items, put_chunk(moto_server, s3_bucket, "k.gz", ROWS, rows=3))
    changed = put_chunk(moto_server, s3_bucket, "k.gz", b"9,z,9\n", rows=1)
    with pytest.raises(ChunkConflictError, match="checksum"):
        hook.load_chunk(items, changed)
    assert len(rows_of(pg_db)) == 3


HOSTILE_NAMES = ['x"; DROP TABLE victim; --', "semi;colon", "it's", 'quo"te', "Mixed Case"]


@pytest.mark.parametrize("method", ["client", "rds_s3"])
@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_table_and_column_names_are_quoted_and_nothing_is_injected(
    pg_aws_s3: TestDatabase, moto_server: MotoServer, s3_bucket: str, name: str, method: str
) -> None:
    from psycopg import sql

    with pg_aws_s3.connect() as conn:
        conn.execute("CREATE TABLE victim (id int); INSERT INTO victim VALUES (42)")
        conn.execute(
            sql.SQL("CREATE TABLE {} ({} int, {} text)").format(
                sql.Identifier(name), sql.Identifier(name + " id"), sql.Identifier(name)
            )
        )
    chunk = put_chunk(moto_server, s3_bucket, "h.gz", b"1,one\n2,two\n", rows=2)
    result = BulkLoadHook(conn_id=pg_aws_s3.conn_id).load_chunk(
        name, chunk, method=method, columns=[name + " id", name]
    )
    assert result.rows == 2
    with pg_aws_s3.connect() as conn:
        loaded = conn.execute(
            sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(name))
        ).fetchall()
    assert loaded == [(1, "one"), (2, "two")]
    assert pg_aws_s3.query("SELECT id FROM victim") == [(42,)]
    assert pg_aws_s3.query("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(2,)]


@pytest.mark.parametrize(
    "name", ['"; DROP TABLE victim; --', "a.b.c", "", "x" * 64, "nul\0byte", 'schema."half']
)
def test_names_that_cannot_be_quoted_are_refused_before_any_sql(
    pg_db: TestDatabase, name: str
) -> None:
    pg_db.query("CREATE TABLE victim (id int)")
    with pytest.raises(InvalidIdentifierError):
        BulkLoadHook(conn_id=pg_db.conn_id).load_chunk(
            name, {"uri": "s3://b/never-read.gz", "checksum": "x"}
        )
    assert pg_db.query("SELECT count(*) FROM victim") == [(0,)]


# -- killed mid-COPY, and bounded memory: both run the load in a separate Python process ---------

LOADER = textwrap.dedent(
    """
    import sys, time
    import airflow_bulkload.s3io as s3io
    from airflow_bulkload.hooks import BulkLoadHook

    table, uri, rows, throttle = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    if throttle:
        # a slow network: small blocks, a pause after each, and a mark once COPY has data
        original_read = s3io.ChunkStream.read
        blocks = 0

        def slow_read(self, size=s3io.READ_BUFFER_BYTES):
            global blocks
            data = original_read(self, 64 * 1024)
            blocks += 1
            if blocks == 3:
                print("STREAMING", flush=True)
            if blocks >= 3:
                time.sleep(0.5)
            return data

        s3io.ChunkStream.read = slow_read
    result = BulkLoadHook(conn_id=sys.argv[5]).load_chunk(
        table, {"uri": uri, "checksum": "c", "rows": rows}
    )
    # VmHWM, not ru_maxrss: a child's ru_maxrss starts from its parent's peak (the test process,
    # whose in-process moto server holds the uploaded chunk), so it would grow with the chunk.
    status = open("/proc/self/status").read()
    peak_kib = int(status.split("VmHWM:", 1)[1].split()[0])
    print(f"RESULT rows={result.rows} peak_kib={peak_kib}", flush=True)
    """
)


def start_loader(db: TestDatabase, table: str, uri: str, rows: int, throttle: bool) -> Any:
    return subprocess.Popen(
        [sys.executable, "-c", LOADER, table, uri, str(rows), "1" if throttle else "0", db.conn_id],
        cwd=REPO_ROOT,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_kill_9_mid_copy_then_rerun_loads_the_chunk_exactly_once(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, items: str
) -> None:
    count = 60_000
    data = b"".join(b"%d,name-%d,%d.25\n" % (i, i, i) for i in range(1, count + 1))
    chunk = put_chunk(moto_server, s3_bucket, "big.gz", data, rows=count)
    loader = start_loader(pg_db, items, chunk["uri"], count, throttle=True)
    try:
        assert loader.stdout is not None
        # Airflow logs to stdout too: read on to the loader's mark
        for line in loader.stdout:
            if line.strip() == "STREAMING":
                break
        else:
            pytest.fail(f"the loader ended before streaming: {loader.stderr.read()}")
        copying = pg_db.query(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND query LIKE 'COPY%%' AND state = 'active'"
        )
        assert copying, "the loader should be inside COPY when it is killed"
        os.kill(loader.pid, signal.SIGKILL)
        loader.wait(timeout=30)
    finally:
        if loader.poll() is None:
            loader.kill()
    deadline = time.monotonic() + 30
    while pg_db.query("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (copying[0][0],)):
        assert time.monotonic() < deadline, "the killed loader's backend did not go away"
        time.sleep(0.1)
    assert pg_db.query("SELECT count(*) FROM items") == [(0,)]

    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    assert hook.load_chunk(items, chunk).rows == count
    assert hook.load_chunk(items, chunk).skipped
    assert pg_db.query("SELECT count(*), count(DISTINCT id), sum(id) FROM items") == [
        (count, count, count * (count + 1) // 2)
    ]


def stage_generated_chunk(moto: MotoServer, bucket: str, key: str, rows: int, tmp: Any) -> str:
    """Write ``rows`` CSV rows gzipped to a temp file and upload it, never holding it in memory."""
    path = tmp / key
    line = b",padding-padding-padding-padding-padding-padding-padding-padding,%d\n"
    with gzip.open(path, "wb", compresslevel=1) as out:
        batch = 10_000
        for start in range(0, rows, batch):
            out.write(
                b"".join(
                    b"%d" % i + line % (i % 997) for i in range(start, min(rows, start + batch))
                )
            )
    moto.client("s3").upload_file(str(path), bucket, key, ExtraArgs={"ContentEncoding": "gzip"})
    path.unlink()
    return f"s3://{bucket}/{key}"


def test_peak_memory_stays_flat_as_the_chunk_grows(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Any
) -> None:
    pg_db.query("CREATE UNLOGGED TABLE wide (id bigint, pad text, n int)")
    peaks = {}
    for rows in (100_000, 800_000):  # about 8 MB and 65 MB uncompressed
        uri = stage_generated_chunk(moto_server, s3_bucket, f"gen-{rows}.csv.gz", rows, tmp_path)
        loader = start_loader(pg_db, "wide", uri, rows, throttle=False)
        out, err = loader.communicate(timeout=300)
        assert loader.returncode == 0, err
        result = next(line for line in out.splitlines() if line.startswith("RESULT "))
        assert result.startswith(f"RESULT rows={rows} "), out
        peaks[rows] = int(result.rsplit("peak_kib=", 1)[1])
        pg_db.query("TRUNCATE wide")
    growth_mib = (peaks[800_000] - peaks[100_000]) / 1024
    # 57 MB more data may cost a few read buffers of noise, never a share of the data
    assert growth_mib < 16, f"peak RSS grew {growth_mib:.1f} MiB with chunk size: {peaks}"
