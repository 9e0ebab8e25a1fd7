"""Hostile regression tests for direct chunks (issue 21): S3 input loaded as stored into
PostgreSQL. Each test FAILS on the code as it was when written and passes once the break is
fixed. Whole-DAG cases are in ``tests/e2e/test_hostile_direct.py``.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import Any

import pytest

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StageResult, StagingOptions, stage
from tests.harness import MotoServer, TestDatabase

NOTES = "CREATE TABLE notes (id int PRIMARY KEY, note text, n int)"


def plan(moto: MotoServer, bucket: str, **options: Any) -> StageResult:
    defaults: dict[str, Any] = {
        "file_format": FileFormat(header=True),
        "chunk_size": 4000,
        "probe_key": ["id"],
        "direct": True,
    }
    return stage(
        f"s3://{bucket}/in/",
        s3=moto.client("s3"),
        staging_uri=f"s3://{bucket}/staging",
        dag_id="nightly",
        table="notes",
        run="2026-11-21",
        options=StagingOptions(**(defaults | options)),
    )


def run_load(hook: BulkLoadHook, staged: StageResult) -> dict[str, Any]:
    hook.reconcile("notes", staged.manifest_uri, load_id="t")
    for chunk in staged.manifest.chunks:
        hook.load_chunk("notes", chunk, load_id="t")
    return hook.verify_load("notes", staged.manifest_uri, load_id="t")


def put(moto: MotoServer, bucket: str, key: str, body: bytes) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def table(db: TestDatabase) -> list[tuple[Any, ...]]:
    return sorted(db.query("SELECT * FROM notes"))


def table_and_ledger(db: TestDatabase) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    ledger = db.query("SELECT chunk_key, rows FROM bulkload.chunk_ledger ORDER BY chunk_key")
    return table(db), ledger


def assert_rolled_back(error: BaseException, db: TestDatabase, before: Any) -> None:
    """The withdraw failed as one: its note says so, the table and the ledger are unchanged."""
    notes = " ".join(getattr(error, "__notes__", []))
    assert "rolled back as one: nothing was taken out" in notes, notes
    assert table_and_ledger(db) == before


@pytest.mark.parametrize(
    ("delimiter", "body"),
    [
        (",", 'id,note,n\n1,5" pipe,2\n2,7" disc,4\n3,plain,6\n'),
        ("\t", 'id\tnote\tn\n1\t5" pipe\t2\n2\t7" disc\t4\n3\tplain\t6\n'),
    ],
    ids=["csv", "tsv"],
)
def test_an_inch_mark_in_an_unquoted_field_never_merges_two_records(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, delimiter: str, body: str
) -> None:
    """What the user did: loaded a product export (CSV, or TSV with the default quote) whose
    unquoted values hold inch marks: ``5" pipe`` and ``7" disc`` on two lines.

    What happened: COPY treats a quote inside an unquoted field as the start of a quoted part,
    so records 1 and 2 became ONE row, (1, '5 pipe,2\\n2,7 disc', 4); row 2 is gone, the quote
    count was even, and verify_load reported the run verified (the count it checks is the
    ledger's, i.e. what COPY made of it). The staged path loads the 3 rows as written.

    What should happen: the 3 rows load as the staged path loads them, or the chunk fails
    before commit naming the record; two records are never silently merged into one.
    """
    pg_db.query(NOTES)
    put(moto_server, s3_bucket, "in/products.csv", body.encode())
    staged = plan(moto_server, s3_bucket, file_format=FileFormat(header=True, delimiter=delimiter))

    try:
        run_load(BulkLoadHook(conn_id=pg_db.conn_id), staged)
    except ChunkLoadError:
        assert table(pg_db) == []
        return
    assert table(pg_db) == [(1, '5" pipe', 2), (2, '7" disc', 4), (3, "plain", 6)]


def test_a_range_between_two_bad_cuts_commits_no_invented_rows(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded customers whose quoted address holds a line end (street on
    line one, "City, ST, ZIP" on line two) with the default quoted_newlines=False; the load
    tasks run each range on its own, as the mapped tasks do.

    What happened: the ranges at a transition (one cut between records, one inside an
    address) failed as documented, but a range whose BOTH cuts fall inside addresses has an
    even quote count, so COPY read it with its quoting inverted and committed 90 rows that
    are in no input record, e.g. ('Springfield 100', ' IL', ' 60100,US\\nCustomer number 0101
    ...'). The same happens under bulk_load_table: the run is red and the table keeps them.

    What should happen: a range cut inside a quoted value never commits; every row in the
    table is a record of the input.
    """
    pg_db.query("CREATE TABLE notes (name text PRIMARY KEY, address text, country text)")
    rows = [
        (
            f"Customer number {i:04d} of the shop",
            f"{i} Main Street Apartment {i} Building B\nSpringfield {i}, IL, 6{i:04d}",
            "US",
        )
        for i in range(1, 200)
    ]
    body = "name,address,country\n" + "".join(f'{a},"{b}",{c}\n' for a, b, c in rows)
    put(moto_server, s3_bucket, "in/customers.csv", body.encode())
    staged = plan(moto_server, s3_bucket, chunk_size=1000, probe_key=["name"])
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    hook.reconcile("notes", staged.manifest_uri, load_id="t")
    failed = 0
    for chunk in staged.manifest.chunks:  # mapped load tasks: one failing stops no other
        try:
            hook.load_chunk("notes", chunk, load_id="t")
        except ChunkLoadError:
            failed += 1

    # quoted values may hold line ends unless the author declares otherwise
    # (quoted_newlines=False): the object loads whole, every record once
    assert failed == 0
    invented = [r for r in table(pg_db) if r not in rows]
    assert invented == []
    assert len(table(pg_db)) == len(rows)


def test_fixing_a_bad_value_in_an_unversioned_bucket_says_what_to_do(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: a nightly load (plain bucket, no versioning: S3's default) failed
    on ``many`` in an integer column in the 2nd range, after the 1st range committed. As
    the error said, they fixed the line in the file (overwrote the object) and ran again.

    What happened: the new input's reconcile must take the 1st range's rows back out, and
    reads them from the old ETag, which is gone: ``ChunkLoadError: the input object changed or
    went away after the load was planned (PreconditionFailed) ... Run the load again:
    planning sees the object as it is now``. Running again fails identically, forever; a
    ``reload=True`` after an object changed in such a bucket fails with the same message.

    What should happen: the re-run loads the fixed file exactly; or, since the old bytes are
    gone, it fails saying so and what to do (versioning, direct=False, or deleting the rows),
    never "run the load again" (docs/how-it-works.md: "the withdraw fails and says so").
    """
    pg_db.query(NOTES)
    lines = [f"{i},note {i},{i}\n" for i in range(1, 601)]
    bad = "id,note,n\n" + "".join(lines).replace(",500\n", ",many\n")
    put(moto_server, s3_bucket, "in/a.csv", bad.encode())
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    with pytest.raises(ChunkLoadError, match="many"):  # ranges: declared no quoted line ends
        run_load(hook, plan(moto_server, s3_bucket, quoted_newlines=False))
    assert pg_db.query("SELECT count(*) FROM notes") > [(0,)]  # the 1st range committed
    put(moto_server, s3_bucket, "in/a.csv", ("id,note,n\n" + "".join(lines)).encode())

    try:
        run_load(hook, plan(moto_server, s3_bucket, quoted_newlines=False))
    except Exception as exc:
        message = str(exc)
        assert "Run the load again" not in message, message
        assert "version" in message.lower(), message
        return
    assert table(pg_db) == [(i, f"note {i}", i) for i in range(1, 601)]


@pytest.mark.parametrize("reload", [True, False], ids=["reload", "after-a-failed-load"])
def test_a_withdraw_that_meets_a_changed_object_in_an_unversioned_bucket_takes_nothing_out(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, reload: bool
) -> None:
    """What the user did (hostile review): a date loaded from three files in a plain bucket
    (no versioning), each cut in ranges; b.csv was then overwritten with other content and the
    date run again, with ``reload`` (or after a load that had not completed).

    What happened: the claim's withdraw took a.csv's ranges back out, committing each, then
    met b.csv's old content gone and failed: the table held neither the old date's rows nor
    the new one's, and every later run stayed there.

    What should happen: the withdraw finds b.csv unreadable before it takes anything out, and
    fails saying so: the table and the chunk ledger stay as they were.
    """
    pg_db.query(NOTES)
    files = {name: range(start, start + 600) for name, start in (("a", 1), ("b", 601), ("c", 1201))}
    for name, ids in files.items():
        body = "id,note,n\n" + "".join(f"{i},note {i},{i}\n" for i in ids)
        put(moto_server, s3_bucket, f"in/{name}.csv", body.encode())
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    first = plan(moto_server, s3_bucket, quoted_newlines=False)
    assert len(first.manifest.chunks) > 3  # each file in ranges
    if reload:
        run_load(hook, first)  # completed and verified: only a reload replaces it
    else:  # a load that did not complete: its committed chunks are withdrawn on the next input
        hook.reconcile("notes", first.manifest_uri, load_id="t")
        for chunk in first.manifest.chunks:
            hook.load_chunk("notes", chunk, load_id="t")
    before = table(pg_db)
    assert len(before) == 1800
    ledger = "SELECT chunk_key, rows FROM bulkload.chunk_ledger ORDER BY chunk_key"
    ledger_before = pg_db.query(ledger)

    body = "id,note,n\n" + "".join(f"{i},changed {i},{i}\n" for i in range(601, 1190))
    put(moto_server, s3_bucket, "in/b.csv", body.encode())
    second = plan(moto_server, s3_bucket, quoted_newlines=False)
    assert second.manifest_uri != first.manifest_uri

    with pytest.raises(ChunkLoadError, match="nothing was taken out of the table") as failure:
        hook.reconcile("notes", second.manifest_uri, load_id="t2", reload=reload)
    assert failure.value.source.endswith("/in/b.csv"), str(failure.value)
    assert "keeps no versions" in str(failure.value)
    assert table(pg_db) == before
    assert pg_db.query(ledger) == ledger_before


def _three_files_loaded(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, **options: Any
) -> tuple[BulkLoadHook, StageResult]:
    pg_db.query(NOTES)
    for name, start in (("a", 1), ("b", 601), ("c", 1201)):
        body = "id,note,n\n" + "".join(f"{i},note {i},{i}\n" for i in range(start, start + 600))
        put(moto_server, s3_bucket, f"in/{name}.csv", body.encode())
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    first = plan(moto_server, s3_bucket, **options)
    run_load(hook, first)
    assert len(table(pg_db)) == 1800
    return hook, first


def test_a_staged_chunk_replaced_since_it_loaded_is_refused_before_any_withdraw(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """Hostile review: a staged chunk (``direct=False``) overwritten with other content passed
    the check (only its existence was), its withdraw took 0 rows out and dropped its ledger
    entry, and the reload then failed on duplicate keys with rows missing. Its size (the
    manifest's) is compared now: refused, nothing changed."""
    hook, first = _three_files_loaded(pg_db, moto_server, s3_bucket, direct=False)
    before = table(pg_db)
    ledger = "SELECT chunk_key, rows FROM bulkload.chunk_ledger ORDER BY chunk_key"
    ledger_before = pg_db.query(ledger)
    last = first.manifest.chunks[-1]
    moto_server.client("s3").put_object(
        Bucket=last.bucket, Key=last.object_key, Body=gzip.compress(b"")
    )
    put(moto_server, s3_bucket, "in/b.csv", b"id,note,n\n601,changed,601\n")
    second = plan(moto_server, s3_bucket, direct=False)

    with pytest.raises(ChunkLoadError, match="was replaced since it loaded"):
        hook.reconcile("notes", second.manifest_uri, load_id="t2", reload=True)
    assert table(pg_db) == before
    assert pg_db.query(ledger) == ledger_before


def gzip_of_size(content: bytes, size: int) -> bytes:
    """``content`` gzipped into exactly ``size`` bytes (the header's comment field pads it)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = deflate.compress(content) + deflate.flush()
    trailer = struct.pack("<II", zlib.crc32(content), len(content) & 0xFFFFFFFF)
    padding = size - (10 + len(body) + len(trailer)) - 1
    assert padding >= 0, "the content compresses to more than the size"
    header = b"\x1f\x8b\x08\x10" + b"\x00" * 4 + b"\x00\xff"  # FCOMMENT
    return header + b"c" * padding + b"\x00" + body + trailer


@pytest.mark.parametrize("changed", ["a-key", "a-value"])
def test_a_staged_chunk_replaced_by_one_of_the_same_size_takes_nothing_out(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, changed: str
) -> None:
    """Hostile review: a staged chunk replaced by other content OF THE SAME SIZE passed the
    HEAD check (size only); its withdraw took what its new keys matched. The withdraw now
    checks each staged chunk's sha256 as it reads it, before the transaction commits, and
    names the replaced chunk (not a changed row) when the new content also refuses."""
    hook, first = _three_files_loaded(pg_db, moto_server, s3_bucket, direct=False)
    before = table_and_ledger(pg_db)
    last = first.manifest.chunks[-1]
    s3 = moto_server.client("s3")
    stored = s3.get_object(Bucket=last.bucket, Key=last.object_key)["Body"].read()
    lines = gzip.decompress(stored).splitlines(keepends=True)
    row = lines[-1]  # same length: a key of no row (9999) or other values for its key
    lines[-1] = b"9999" + row[4:] if changed == "a-key" else row.replace(b"note", b"NOTE")
    s3.put_object(
        Bucket=last.bucket, Key=last.object_key, Body=gzip_of_size(b"".join(lines), len(stored))
    )

    with pytest.raises(
        ChunkLoadError, match=r"was replaced since it loaded \(its sha256"
    ) as failure:
        hook.reconcile("notes", first.manifest_uri, load_id="t2", reload=True)
    assert_rolled_back(failure.value, pg_db, before)


def test_a_withdraw_that_meets_an_edited_row_takes_nothing_out(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """Hostile review: a row of c.csv edited in the table (an application), then a reload of
    the date. Each chunk's withdraw committed on its own, so c's refused (its row changed) after
    a's and b's rows were out: the date was left half withdrawn. The chunks now go out in one
    transaction: c's refusal rolls a's and b's back, and the error says nothing was taken out."""
    from airflow_bulkload.exceptions import WithdrawChangedRowsError

    hook, first = _three_files_loaded(pg_db, moto_server, s3_bucket, quoted_newlines=False)
    pg_db.query("UPDATE notes SET note = 'edited by an app' WHERE id = 1800")
    before = table_and_ledger(pg_db)

    with pytest.raises(WithdrawChangedRowsError) as failure:  # the same input, reloaded
        hook.reconcile("notes", first.manifest_uri, load_id="t2", reload=True)
    assert_rolled_back(failure.value, pg_db, before)


def test_an_object_overwritten_after_the_check_takes_nothing_out(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, monkeypatch: Any
) -> None:
    """Hostile review: c.csv (unversioned bucket) overwritten in the moment after the withdraw
    checked every object and before it read c's: a's and b's ranges were out, each committed,
    when c's pinned read failed. The chunks now go out in one transaction: nothing is taken out.
    The overwrite is made right after the real check returns (the race, made certain)."""
    from airflow_bulkload.hooks import table_truth

    hook, first = _three_files_loaded(pg_db, moto_server, s3_bucket, quoted_newlines=False)
    before = table_and_ledger(pg_db)
    checked = table_truth.withdrawable_specs

    def check_then_overwrite(*args: Any, **kwargs: Any) -> Any:
        specs = checked(*args, **kwargs)
        put(moto_server, s3_bucket, "in/c.csv", b"id,note,n\n1201,overwritten,1\n")
        return specs

    monkeypatch.setattr(table_truth, "withdrawable_specs", check_then_overwrite)
    with pytest.raises(ChunkLoadError, match="keeps no versions") as failure:
        hook.reconcile("notes", first.manifest_uri, load_id="t2", reload=True)
    assert_rolled_back(failure.value, pg_db, before)


@pytest.mark.parametrize("gzipped", [False, True], ids=["range", "gzip"])
def test_a_bad_value_in_a_file_with_reordered_columns_names_its_line(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, gzipped: bool
) -> None:
    """What the user did: two files of one input, b's columns in another order (``n,id,note``,
    which direct loads map by name); b's line 501 holds ``many`` in the integer column n.

    What happened: the error names ``b.csv, line 99`` (plain, cut in ranges: the line within
    the range) or ``b.csv.gz, line 500`` (the header not counted): the record is looked up
    with the FIRST file's column order (the manifest's), is not found, and the chunk's own
    line is shown as if it were the file's.

    What should happen: the error names b's line 501, as it does for a file in the first
    file's column order.
    """
    pg_db.query(NOTES)
    put(
        moto_server,
        s3_bucket,
        "in/a.csv",
        ("id,note,n\n" + "".join(f"{i},note {i},{i}\n" for i in range(1, 601))).encode(),
    )
    b = "n,id,note\n" + "".join(
        f"{'many' if i == 1500 else i},{i},note {i}\n" for i in range(1001, 1601)
    )
    name = "in/b.csv.gz" if gzipped else "in/b.csv"
    put(moto_server, s3_bucket, name, gzip.compress(b.encode()) if gzipped else b.encode())
    staged = plan(moto_server, s3_bucket)

    with pytest.raises(ChunkLoadError) as failure:
        run_load(BulkLoadHook(conn_id=pg_db.conn_id), staged)

    assert failure.value.source == f"s3://{s3_bucket}/{name}"
    assert failure.value.line == 501


@pytest.mark.parametrize(
    "body",
    [
        b"id,note,n\n1,a,2\n2,b,4\n\n",  # a trailing blank line (an editor's final newline)
        b"id,note,n\n1,a,2\n\n2,b,4\n",  # a blank line between records
    ],
    ids=["trailing", "inner"],
)
def test_blank_lines_load_as_staging_loads_them(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, body: bytes
) -> None:
    """What the user did: loaded a hand-edited CSV that ends with an empty line (or holds one).

    What happened: staged, it loads its 2 rows; direct (the PostgreSQL default) it fails with
    ``missing data for column "note"``, naming line 3 for the trailing case, where the blank
    line is line 4 (the header is not counted). bulk_load_table offers no way to stage it.

    What should happen: the 2 rows load, as staging loads them.
    """
    pg_db.query(NOTES)
    put(moto_server, s3_bucket, "in/a.csv", body)

    run_load(BulkLoadHook(conn_id=pg_db.conn_id), plan(moto_server, s3_bucket))

    assert table(pg_db) == [(1, "a", 2), (2, "b", 4)]


def test_a_header_with_spaces_after_the_commas_loads_as_staging_loads_it(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded a CSV whose header reads ``id, note, n``.

    What happened: staged, the names are trimmed and the rows load; direct, COPY is given the
    column " note" and fails: ``column " note" of relation "notes" does not exist``.

    What should happen: the rows load, as staging loads them.
    """
    pg_db.query(NOTES)
    put(moto_server, s3_bucket, "in/a.csv", b"id, note, n\n1,a,2\n2,b,4\n")

    run_load(BulkLoadHook(conn_id=pg_db.conn_id), plan(moto_server, s3_bucket))

    assert table(pg_db) == [(1, "a", 2), (2, "b", 4)]


def test_a_file_with_cr_line_ends_loads_as_staging_loads_it(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded an old Mac export whose lines end in CR alone (COPY reads
    CR line ends).

    What happened: planning reads the "first line" up to a LF that never comes and crashes
    in the csv module: ``_csv.Error: new-line character seen in unquoted field``. Staged, the
    600 rows load.

    What should happen: the 600 rows load (or the file is staged); no raw csv error.
    """
    pg_db.query(NOTES)
    body = "id,note,n\r" + "".join(f"{i},note {i},{i}\r" for i in range(1, 601))
    put(moto_server, s3_bucket, "in/a.csv", body.encode())

    run_load(BulkLoadHook(conn_id=pg_db.conn_id), plan(moto_server, s3_bucket))

    assert table(pg_db) == [(i, f"note {i}", i) for i in range(1, 601)]


def test_a_stray_quote_in_a_whole_object_does_not_advise_what_is_already_set(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: after a cut error they set quoted_newlines=True, as told; one
    record of a gzip part holds an unmatched quote (``a 5" pipe``).

    What happened: ``bytes 0-56 end inside a quoted value ... across the cut at byte 56 ...
    run the load with quoted_newlines=True``: a gzip object has no cut (56 is its compressed
    size), and quoted_newlines is already True, so the advice loops.

    What should happen: the rows load as staging loads them, or the error names the record
    (file, line) with the unmatched quote and does not ask for quoted_newlines=True.
    """
    pg_db.query(NOTES)
    body = b'id,note,n\n1,a 5" pipe,2\n2,b,4\n3,c,6\n'
    put(moto_server, s3_bucket, "in/a.csv.gz", gzip.compress(body))
    staged = plan(moto_server, s3_bucket, quoted_newlines=True)

    try:
        run_load(BulkLoadHook(conn_id=pg_db.conn_id), staged)
    except ChunkLoadError as exc:
        assert "quoted_newlines=True" not in str(exc), str(exc)
        assert exc.line == 2, str(exc)
        return
    assert table(pg_db) == [(1, 'a 5" pipe', 2), (2, "b", 4), (3, "c", 6)]


def test_a_corrupt_gzip_part_is_named_at_planning(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: one of the input's gzip parts is damaged in its first block.

    What happened: planning died with a bare ``zlib.error: Error -3 while decompressing data:
    invalid distance too far back``, naming no object (the input may have hundreds).

    What should happen: an error that names the damaged object (as a load task does for a
    truncated one: ``ChunkLoadError: s3://.../part.csv.gz: the gzip stream is corrupt``).
    """
    pg_db.query(NOTES)
    data = gzip.compress(
        ("id,note,n\n" + "".join(f"{i},note {i},{i}\n" for i in range(1, 3001))).encode()
    )
    put(moto_server, s3_bucket, "in/good.csv.gz", gzip.compress(b"id,note,n\n5000,x,1\n"))
    damaged = data[:200] + bytes(b ^ 0x55 for b in data[200:260]) + data[260:]
    put(moto_server, s3_bucket, "in/part-7.csv.gz", damaged)

    with pytest.raises(Exception) as failure:
        run_load(BulkLoadHook(conn_id=pg_db.conn_id), plan(moto_server, s3_bucket))

    assert f"s3://{s3_bucket}/in/part-7.csv.gz" in str(failure.value), repr(failure.value)


def test_an_ascii_input_loads_or_is_refused_at_planning(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: declared ``encoding="ascii"`` (direct.py lists it among "the
    encodings PostgreSQL's COPY reads as such").

    What happened: planning accepted it; every load task then failed with PostgreSQL's
    ``argument to option "encoding" must be a valid encoding name`` (PostgreSQL knows no
    "ascii"; SQL_ASCII is another thing).

    What should happen: the rows load (ASCII is UTF-8), or planning refuses the encoding,
    as staging does, before any load task runs.
    """
    pg_db.query(NOTES)
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,2\n2,b,4\n")
    try:
        staged = plan(moto_server, s3_bucket, file_format=FileFormat(header=True, encoding="ascii"))
    except Exception as exc:
        assert "ascii" in str(exc)
        return

    run_load(BulkLoadHook(conn_id=pg_db.conn_id), staged)

    assert table(pg_db) == [(1, "a", 2), (2, "b", 4)]


def test_a_long_last_record_without_a_final_line_end_is_not_refused(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded a file whose last record (a 3 KB note) has no final line
    end, with chunk_size 4000 bytes.

    What happened: planning looks for a cut after byte 4000, inside the last record, finds no
    line end before the end of the object and refuses the file: ``no line end within 8 MB
    after byte 4000: records are longer than a record may be`` (the record is 3 KB).

    What should happen: the last record ends the last range; the 300 rows load.
    """
    pg_db.query(NOTES)
    rows = [(i, f"long note {'z' * 3000}" if i == 300 else f"n{i}", i) for i in range(1, 301)]
    put(
        moto_server,
        s3_bucket,
        "in/a.csv",
        ("id,note,n\n" + "\n".join(f"{a},{b},{c}" for a, b, c in rows)).encode(),
    )

    run_load(BulkLoadHook(conn_id=pg_db.conn_id), plan(moto_server, s3_bucket))

    assert table(pg_db) == rows
