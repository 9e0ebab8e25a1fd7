"""Hostile round 3: the rejects file's ``record`` is not the record as written.

did: set aside (max_errors=5) a bad record after CRLF line ends, after blank lines, with a
    Latin-1 byte in a UTF-8 input, and one of 3 MB (well under the 8 MB record limit).
happened: ``record`` is ``'\\n2,bad'`` (CRLF input: the LF of the line before), ``'\\n\\n3,bad'``
    (the blank lines before it), ``'1,caf??1'`` for ``1,caf\\xe9,1`` (the invalid byte and the
    delimiter after it replaced by ``??``: the record's fields can no longer be told apart),
    and the 3 MB record is cut to its first 10 000 characters with no mark.
should: the record as it stands in the file (without its line end; undecodable bytes
    replaced one for one, delimiters kept), whole, or marked as cut.
"""

from __future__ import annotations

import pytest

from tests.harness import MotoServer
from tests.integration.staging.test_rejects import plan, put, read_rejects


@pytest.mark.parametrize(
    ("data", "record"),
    [
        (b"id,note,n\r\n1,a,1\r\n2,bad\r\n3,y,3\r\n", "2,bad"),
        (b"id,note,n\n1,a,1\n\n2,x,2\n\n\n3,bad\n4,y,4\n", "3,bad"),
    ],
    ids=["crlf", "blank-lines-before"],
)
def test_the_record_is_the_bad_line_alone(
    data: bytes, record: str, moto_server: MotoServer, s3_bucket: str
) -> None:
    put(moto_server, s3_bucket, "in/a.csv", data)

    staged = plan(moto_server, s3_bucket, max_errors=5)

    assert staged.manifest is not None
    [row] = read_rejects(moto_server, staged.manifest.rejects[0])
    assert row["record"] == record


def test_a_record_with_a_latin1_byte_keeps_its_delimiters(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,caf\xe9,1\n2,x,2\n")

    staged = plan(moto_server, s3_bucket, max_errors=5)

    assert staged.manifest is not None
    [row] = read_rejects(moto_server, staged.manifest.rejects[0])
    assert row["error"] == "INVALID ENCODING"
    assert row["record"].count(",") == 2, row["record"]  # got '1,caf??1'


def test_a_long_bad_record_is_listed_whole(moto_server: MotoServer, s3_bucket: str) -> None:
    value = b"y" * (3 * 1024 * 1024)
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,1\n2," + value + b",2,extra\n3,c,3\n")

    staged = plan(moto_server, s3_bucket, max_errors=5)

    assert staged.manifest is not None
    [row] = read_rejects(moto_server, staged.manifest.rejects[0])
    assert len(row["record"]) == len(value) + len("2,,2,extra")  # got 10 000
