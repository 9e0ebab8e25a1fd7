"""The in-flight rewrite of CSV as stored into what MySQL's ``LOAD DATA`` reads as staging does.

Random records are written as CSV (quoted or not at random, LF or CRLF line ends), cut into
blocks at line ends as the direct reader hands them out (also inside quoted values), rewritten,
and read back the way ``LOAD DATA ... OPTIONALLY ENCLOSED BY '"' ESCAPED BY ''`` reads them: the
values must be the ones CSV's own reading gives, NULLs and empty strings apart.
"""

from __future__ import annotations

import random

import pytest

from airflow_bulkload.dialects.mysql import stored_csv
from airflow_bulkload.dialects.mysql.stored_csv import StoredCsvRewriter
from airflow_bulkload.exceptions import InvalidFileFormatError
from airflow_bulkload.staging.manifest import FileFormat

Record = list[str | None]


def tokens(text: str, delimiter: str, crlf: bool = False) -> list[list[tuple[bool, str]]]:
    """(quoted, value) of each field of each record; LF ends a line (and CRLF after a quoted
    value with ``crlf``: CSV's reading; LOAD DATA's is LF alone)."""
    records: list[list[tuple[bool, str]]] = []
    fields: list[tuple[bool, str]] = []
    at, end = 0, len(text)
    while at < end:
        if text[at] == '"':
            parts, start = [], at + 1
            while True:
                close = text.index('"', start)
                parts.append(text[start:close])
                if text.startswith('""', close):
                    parts.append('"')
                    start = close + 2
                    continue
                at = close + 1
                if crlf and text.startswith("\r\n", at):
                    at += 1
                break
            fields.append((True, "".join(parts)))
        else:
            stops = [i for i in (text.find(delimiter, at), text.find("\n", at)) if i >= 0]
            stop = min(stops) if stops else end
            fields.append((False, text[at:stop]))
            at = stop
        if at < end and text[at] == delimiter:
            at += 1
            if at == end:  # else the next round reads the last value (empty at a line end)
                fields.append((False, ""))
        elif at < end:
            assert text[at] == "\n", f"text after a value at {at}: {text[at : at + 10]!r}"
            at += 1
            records.append(fields)
            fields = []
    if fields:
        records.append(fields)
    return records


def read_as_csv(text: str, delimiter: str, null: str) -> list[Record]:
    """CSV's reading (staging's, COPY's): NULL is the null string unquoted; CRLF ends a line."""
    records = tokens(text, delimiter, crlf=True)
    for fields in records:
        quoted, last = fields[-1]
        if not quoted and last.endswith("\r"):
            fields[-1] = (False, last[:-1])
    return [[None if not q and v == null else v for q, v in fields] for fields in records]


def read_as_load_data(text: str, delimiter: str) -> list[Record]:
    """LOAD DATA's reading of the rewritten text: NULL is the word NULL, unquoted."""
    return [[None if not q and v == "NULL" else v for q, v in f] for f in tokens(text, delimiter)]


def write_csv(rng: random.Random, records: list[Record], delimiter: str, null: str) -> str:
    def field(value: str | None) -> str:
        if value is None:
            return null
        must = any(c in value for c in delimiter + '"\r\n') or value in ("", null)
        return '"' + value.replace('"', '""') + '"' if must or rng.random() < 0.3 else value

    ends = ["\n", "\r\n"]
    text = "".join(
        delimiter.join(field(v) for v in record) + rng.choice(ends) for record in records
    )
    return text if rng.random() < 0.5 else text.rstrip("\r\n")


def blocks_at_line_ends(rng: random.Random, data: bytes) -> list[bytes]:
    cuts = sorted({i + 1 for i, b in enumerate(data) if b == 10 and rng.random() < 0.2})
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if a < b]


PIECES = ["", "NULL", "null", "NA", ",", "\t", '"', "\n", "\r\n", "\r", "a", " ", "\\", "é"]


@pytest.mark.parametrize("slice_bytes", [5, 64 * 1024], ids=["tiny-slices", "slices"])
@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize(
    ("delimiter", "null"), [(",", ""), (",", "NA"), ("\t", ""), (",", "NULL"), (";", "\\N")]
)
def test_random_csv_reads_alike_after_the_rewrite(
    seed: int, delimiter: str, null: str, slice_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tiny slices: a block with quotes is rewritten in slices cut at quotes (64 KB each)."""
    monkeypatch.setattr(stored_csv, "_SLICE_BYTES", slice_bytes)
    rng = random.Random(seed)
    columns = rng.randint(1, 5)
    records: list[Record] = [
        [
            None if rng.random() < 0.25 else "".join(rng.choices(PIECES, k=rng.randint(0, 3)))
            for _ in range(columns)
        ]
        for _ in range(rng.randint(1, 40))
    ]
    if columns == 1:  # an empty line is no record: CSV writes a lone NULL or "" quoted then
        records = [[v if v is not None or null else "x"] for (v,) in records]
    text = write_csv(rng, records, delimiter, null)
    rewriter = StoredCsvRewriter(FileFormat(delimiter=delimiter, null=null))
    out = b"".join(rewriter.rewrite(b) for b in blocks_at_line_ends(rng, text.encode()))
    assert read_as_csv(text, delimiter, null) == records
    assert read_as_load_data(out.decode(), delimiter) == records


@pytest.mark.parametrize(
    ("stored", "loaded"),
    [
        (b"1,,a\n", b"1,NULL,a\n"),
        (b",x,\n", b"NULL,x,NULL\n"),
        (b'NULL,"NULL",NULL\n', b'"NULL","NULL","NULL"\n'),
        (b'1,"",\r\n', b'1,"",NULL\n'),
        (b'3,"x\r\ny",NULL\r\n', b'3,"x\r\ny","NULL"\n'),
        (b"4,NULLX,XNULL,,,\n", b"4,NULLX,XNULL,NULL,NULL,NULL\n"),
        (b"7,", b"7,NULL"),
        (b"8,x\r", b"8,x"),
    ],
)
def test_the_rewrite_of_single_blocks(stored: bytes, loaded: bytes) -> None:
    assert StoredCsvRewriter(FileFormat()).rewrite(stored) == loaded


def test_a_quoted_value_open_across_blocks_is_left_alone() -> None:
    rewriter = StoredCsvRewriter(FileFormat())
    blocks = [b'1,"abc\n', b",,NULL\n", b'",\n', b"2,NULL,"]
    assert [rewriter.rewrite(b) for b in blocks] == [
        b'1,"abc\n',
        b",,NULL\n",
        b'",NULL\n',
        b'2,"NULL",NULL',
    ]


def test_a_null_string_holding_the_delimiter_is_refused() -> None:
    with pytest.raises(InvalidFileFormatError, match="direct=False"):
        StoredCsvRewriter(FileFormat(null="a,b"))
