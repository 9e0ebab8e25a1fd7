"""Hostile regression tests for MySQL loading CSV as stored (direct chunks rewritten in flight by
``dialects/mysql/stored_csv``, read by ``staging/direct``).

The promise under test: a direct MySQL load gives exactly the table the same input gives staged
(``direct=False``), or fails before commit with a clear error naming the object, its line and
column; never a silent difference, never a lost or doubled row. Each test FAILS on the code as it
was when written (commit 55d0c0a) and passes once the break is fixed.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from airflow_bulkload.dialects.mysql.stored_csv import StoredCsvRewriter
from airflow_bulkload.exceptions import BulkLoadError, ChunkLoadError
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StageResult
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import create_and_load, load_staged, stage_checked

HEADER = FileFormat(header=True)


def put(moto: MotoServer, bucket: str, key: str, body: bytes) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def rows(db: TestDatabase, table: str) -> list[tuple[Any, ...]]:
    """Every column as (hex, is null): bytes and NULLs compared exactly."""
    names = [
        c
        for (c,) in db.query(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (table,),
        )
    ]
    select = ", ".join(f"HEX(`{c}`), `{c}` IS NULL" for c in names)
    return sorted(db.query(f"SELECT {select} FROM `{table}`"), key=repr)


def load_notes(db: TestDatabase, moto: MotoServer, bucket: str, fmt: FileFormat) -> StageResult:
    """The input under ``in/`` loaded direct into a new ``notes (id int PRIMARY KEY, note)``."""
    return create_and_load(
        db,
        moto,
        bucket,
        "notes",
        "id int PRIMARY KEY, note text",
        direct=True,
        expect_direct=True,
        file_format=fmt,
    )


def staged_and_direct(
    db: TestDatabase,
    moto: MotoServer,
    bucket: str,
    ddl: str,
    planned_direct: bool = True,
    **options: Any,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows of the input loaded staged, then loaded with direct asked for (each into its own
    table; ``planned_direct``: whether planning must take it as stored)."""
    options.setdefault("file_format", HEADER)
    for table, direct, expected in (("staged", False, False), ("direct", True, planned_direct)):
        create_and_load(
            db, moto, bucket, table, ddl, direct=direct, expect_direct=expected, **options
        )
    return rows(db, "staged"), rows(db, "direct")


@pytest.mark.parametrize(
    ("fmt", "body"),
    [
        (HEADER, b"token\nalpha\n\nbeta\n\n"),
        (HEADER, b"token\r\nalpha\r\n\r\nbeta\r\n"),
        (FileFormat(header=False), b"alpha\n\nbeta\n"),
    ],
    ids=["lf", "crlf", "headerless"],
)
def test_a_one_column_input_keeps_its_empty_records(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, fmt: FileFormat, body: bytes
) -> None:
    """What the user did: loaded a one-column CSV (a list of tokens, some missing) into a
    nullable column on MySQL with ``sort_by_primary_key=False``, so it loaded as stored.

    What happened: in a one-column CSV an empty line is a record whose one field is empty (the
    NULL): staged, every empty line loads as a NULL row (DuckDB reads it so, as COPY would).
    Direct, ``_DirectReader._without_blank_lines`` drops every empty line as if it were padding
    between records: the NULL rows are silently lost (4 rows staged, two of them NULL; 2 direct in the
    LF case) and the run is green. With ranges (``quoted_newlines=False``) half of a token list with a
    blank line after each token went missing.

    What should happen: the direct table equals the staged one (empty lines are dropped only
    where they cannot be a record: with more than one column), or the load fails before commit.
    Fixed: planning stages a one-column input.
    """
    put(moto_server, s3_bucket, "in/tokens.csv", body)

    staged, direct = staged_and_direct(
        mysql_db,
        moto_server,
        s3_bucket,
        "token varchar(20)",
        file_format=fmt,
        planned_direct=False,
    )

    assert (None, 1) in staged  # the reference: an empty line is a NULL record
    assert direct == staged


def test_latin1_bytes_0x80_to_0x9f_are_not_read_as_windows_1252(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded a CSV declared ``encoding="LATIN1"`` holding bytes 0x80, 0x93
    and 0x94 (C1 controls in ISO-8859-1) on MySQL, loaded as stored.

    What happened: staged, DuckDB refuses the file ("File is not latin-1 encoded"). Direct, the
    load goes through ``LOAD DATA ... CHARACTER SET latin1``, and MySQL's ``latin1`` is really
    Windows-1252: the row commits with the text ``€“”`` (E2 82 AC ...), characters the input
    does not hold in the encoding the author declared (PostgreSQL's LATIN1 would store
    U+0080, U+0093, U+0094). A silent difference from the staged load, which fails.

    What should happen: the direct load fails before commit (as staging does), or stores what the
    bytes mean in ISO-8859-1; never the Windows-1252 reading.
    """
    body = b"id,note\n1,\x80 \x93quoted\x94\n"
    put(moto_server, s3_bucket, "in/a.csv", body)
    fmt = FileFormat(header=True, encoding="LATIN1")

    try:
        load_notes(mysql_db, moto_server, s3_bucket, fmt)
    except BulkLoadError:
        assert mysql_db.query("SELECT count(*) FROM notes") == [(0,)]
        return
    [(note,)] = mysql_db.query("SELECT note FROM notes")
    assert note == "\x80 \x93quoted\x94", note.encode("unicode_escape")


def test_a_latin1_input_starting_with_the_bytes_of_a_utf8_bom_keeps_them_as_staged(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded a headerless ``encoding="LATIN1"`` CSV whose first value begins
    with the bytes EF BB BF (``ï»¿`` in Latin-1) into a text column.

    What happened: staged, the value loads as ``ï»¿hello`` (Latin-1 has no BOM: those bytes are
    text). Direct, ``_DirectReader._start`` strips a UTF-8 BOM whatever the declared encoding, and
    the row loads as ``hello``: a silent difference.

    What should happen: the direct table equals the staged one (a UTF-8 BOM is only skipped in
    UTF-8 input), or the load fails before commit.
    """
    put(moto_server, s3_bucket, "in/a.csv", b"\xef\xbb\xbfhello,1\n")

    staged, direct = staged_and_direct(
        mysql_db,
        moto_server,
        s3_bucket,
        "note varchar(20), id int PRIMARY KEY",
        file_format=FileFormat(header=False, encoding="LATIN1"),
    )

    assert staged[0][0] == "ï»¿hello".encode().hex().upper()  # the reference
    assert direct == staged


def test_a_header_naming_one_column_twice_in_two_cases_is_refused(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded a CSV whose header is ``id,note,NOTE`` (an export with two
    columns whose names differ only in case) into ``(id, note)`` on MySQL, loaded as stored.

    What happened: MySQL's column names are case-insensitive, so ``LOAD DATA ... (id, note,
    NOTE)`` writes both fields into ``note``; the last wins and the row commits as ``(1, 'b')``:
    the value ``a`` is silently dropped. Staged, the load fails (``Unknown column 'NOTE_1'``), and
    a header naming ``note`` twice in one case is refused up front ("names column(s) ['note']
    more than once").

    What should happen: the direct load is refused before commit, naming the duplicate column,
    as it is for ``id,note,note``.
    """
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,NOTE\n1,a,b\n")

    with pytest.raises(BulkLoadError):
        load_notes(mysql_db, moto_server, s3_bucket, HEADER)
    assert mysql_db.query("SELECT count(*) FROM notes") == [(0,)]


def test_a_stray_quote_in_a_later_range_names_the_objects_line(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded a 300-record CSV cut in byte ranges (``quoted_newlines=False``,
    a small ``chunk_size``); line 251 holds ``5"`` (a quote inside an unquoted value).

    What happened: the chunk fails before commit, as it should, but the error says ``line 54``:
    ``_DirectReader._refuse_misread`` counts lines from the start of the *range*, and
    ``BulkLoadHook._at_source`` passes a ``DirectInputError`` on as "the object's line already".
    Line 54 of the object is a good record. (A bad integer at the same place is correctly
    named line 251: only the reader's own refusals are off.)

    What should happen: the error names the object's line 251.
    """
    lines = "".join(f"{i},note {i},{'5' + chr(34) if i == 250 else i}\n" for i in range(1, 301))
    put(moto_server, s3_bucket, "in/a.csv", ("id,note,n\n" + lines).encode())

    with pytest.raises(ChunkLoadError) as failure:
        create_and_load(
            mysql_db,
            moto_server,
            s3_bucket,
            "notes",
            "id int PRIMARY KEY, note text, n text",
            direct=True,
            file_format=HEADER,
            chunk_size=1000,
            quoted_newlines=False,
        )

    assert failure.value.source == f"s3://{s3_bucket}/in/a.csv"
    assert failure.value.line == 251, str(failure.value)


@pytest.mark.parametrize("encoding", ["UTF8", "LATIN1"])
def test_a_non_ascii_delimiter_loads_as_staged_or_is_staged(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, encoding: str
) -> None:
    """What the user did: loaded a ``§``-separated CSV (``delimiter="§"``) on MySQL with
    ``sort_by_primary_key=False``; ``direct="auto"`` plans it as stored.

    What happened: staged, it loads its 4 rows. Direct with UTF-8, MariaDB answers ``LOAD DATA
    ... FIELDS TERMINATED BY X'C2A7'`` with warning 1638 "Non-ASCII separator arguments are not
    fully supported" and the chunk fails (no line, no hint to stage); before 631533c MySQL
    always staged and this input loaded. Direct with Latin-1, ``CopySafety`` encodes the
    delimiter as UTF-8 and refuses line 2 for "a quote inside an unquoted value" in a file
    that holds no quote at all.

    What should happen: the direct load gives the staged rows, or planning stages the input
    (a delimiter LOAD DATA cannot take is no reason to fail a load staging can do).
    """
    body = 'id§note§n\n1§§1\n2§""§2\n3§NULL§3\n4§"a§b"§\n'.encode(
        "latin-1" if encoding == "LATIN1" else "utf-8"
    )
    put(moto_server, s3_bucket, "in/a.csv", body)
    fmt = FileFormat(header=True, delimiter="§", encoding=encoding)
    columns = "id int PRIMARY KEY, note text, n int"

    create_and_load(
        mysql_db, moto_server, s3_bucket, "staged", columns, direct=False, file_format=fmt
    )
    mysql_db.query(f"CREATE TABLE direct ({columns})")
    plan = stage_checked(mysql_db, moto_server, s3_bucket, "direct", direct=True, file_format=fmt)
    load_staged(mysql_db, plan, "direct")

    assert len(rows(mysql_db, "staged")) == 4
    assert rows(mysql_db, "direct") == rows(mysql_db, "staged")


@pytest.mark.xfail(
    strict=True,
    reason='a record is traced to its input line by content, and Python\'s csv reads "" and an '
    "empty field alike (the staged path names the same line): the error names the chunk and "
    "the record's values, and the first line holding them",
)
def test_a_null_into_not_null_in_a_keyless_table_names_its_own_line(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded (as stored) a keyless table ``(note varchar NOT NULL, n int)``
    from ``x,1`` / ``"",1`` / ``,1``: line 4's unquoted empty note is NULL.

    What happened: MySQL names row 3; the hook reads record 3 back with Python's csv module,
    which reads ``""`` and an empty field alike, looks ``['', '1']`` up in the object from its
    start and finds line 3, the good record (an empty string). The error says "line 3".
    (The staged path traces it to line 3 as well.)

    What should happen: the error names line 4, the record that holds the NULL; a direct
    chunk's reader knows which line its record N is without searching by content.
    """
    put(moto_server, s3_bucket, "in/a.csv", b'note,n\nx,1\n"",1\n,1\n')

    with pytest.raises(ChunkLoadError) as failure:
        create_and_load(
            mysql_db,
            moto_server,
            s3_bucket,
            "notes",
            "note varchar(10) NOT NULL, n int",
            direct=True,
            file_format=HEADER,
        )

    assert mysql_db.query("SELECT count(*) FROM notes") == [(0,)]
    assert failure.value.line == 4, str(failure.value)


def test_the_rewrite_holds_a_few_copies_of_a_block_not_a_hundred() -> None:
    """What the user did: loaded, as stored on MySQL, a CSV with one long legal value made of
    doubled quotes (2 M literal ``"`` characters, 4 MB on one line; records up to 8 MB pass the
    reader).

    What happened: ``StoredCsvRewriter.rewrite`` splits the block at every quote into a list of
    bytes objects, copies the list, and splits the rewritten text again: ~443 MB of Python
    memory at peak for a 4 MB block (about 105 copies; an 8 MB record needs ~0.9 GB), on a load
    worker that also streams other chunks. The module says "Memory: a few copies of one block".

    What should happen: peak memory stays within a few copies of the block (here: under 10).
    """
    block = b'1,"' + b'""' * (2 * 1024 * 1024) + b'",2\n'
    rewriter = StoredCsvRewriter(FileFormat())
    tracemalloc.start()
    try:
        out = rewriter.rewrite(block)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == block
    assert peak < 10 * len(block), (
        f"peak {peak / 2**20:.0f} MB for a {len(block) / 2**20:.0f} MB block"
    )
