"""MySQL loads CSV as stored (direct chunks) exactly as it loads the same input staged.

Each case puts one input in S3 and loads it twice into MariaDB: staged (DuckDB rewrites it into
staging's MySQL form) and direct (``LOAD DATA`` reads the object itself, rewritten in flight by
``dialects/mysql/stored_csv``). The two tables must hold the same rows, NULLs and empty strings
apart, byte for byte.
"""

from __future__ import annotations

import gzip
import random
from typing import Any

import pytest

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StageResult
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import load_staged, stage_checked

TABLE = "CREATE TABLE {name} (id int PRIMARY KEY, note text, tag varchar(20), n int) "


def put(moto: MotoServer, bucket: str, key: str, body: bytes) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def both_ways(
    db: TestDatabase, moto: MotoServer, bucket: str, prefix: str = "", **options: Any
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], StageResult]:
    """The rows of the input under ``in/`` loaded staged and loaded direct, and the direct plan."""
    loaded = []
    direct_plan: StageResult | None = None
    for name, direct in ((f"{prefix}staged", False), (f"{prefix}direct", True)):
        db.query(TABLE.format(name=name))
        staged = stage_checked(db, moto, bucket, name, direct=direct, **options)
        assert all(chunk.is_direct == direct for chunk in staged.manifest.chunks)
        load_staged(db, staged, name)
        loaded.append(db.query(f"SELECT id, note, note IS NULL, tag, n FROM {name} ORDER BY id"))
        if direct:
            direct_plan = staged
    assert direct_plan is not None
    return loaded[0], loaded[1], direct_plan


def test_nulls_empty_strings_and_the_word_null_load_as_staged(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    body = (
        "id,note,tag,n\n"
        "1,,a,1\n"  # unquoted empty: NULL
        '2,"",b,2\n'  # quoted empty: an empty string
        "3,NULL,NULL,3\n"  # the word NULL, unquoted: text in CSV
        '4,"NULL",null,4\n'
        '5,"a,"",b","",\n'  # a delimiter and doubled quotes inside; empty n: NULL
        "6,\\N,\\,6\n"  # backslashes are data
        '7,"two\nlines",x,7\n'
        '8,"crlf\r\ninside",y,8\n'
        "9,NULLS,ANULL,9"  # no line end at the end of the object
    )
    put(moto_server, s3_bucket, "in/a.csv", body.encode())
    # an object without a quote takes the rewrite's short way
    put(moto_server, s3_bucket, "in/b.csv", b"id,note,tag,n\n10,NULL,x,10\n11,,NULL,\n")
    staged, direct, _ = both_ways(mysql_db, moto_server, s3_bucket)
    assert direct == staged
    assert direct[-2:] == [(10, "NULL", 0, "x", 10), (11, None, 1, "NULL", None)]
    assert direct[0][1:3] == (None, 1) and direct[1][1:3] == ("", 0)
    assert direct[2][1] == "NULL" and direct[2][3] == "NULL"


def test_crlf_objects_plain_and_gzip_load_as_staged(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    def body(ids: range) -> bytes:
        def note(i: int) -> str:
            return "" if i % 3 == 0 else '""' if i % 5 == 0 else f"note {i}"

        lines = "".join(f"{'' if i % 4 else 't'},{i},{note(i)},{i}\r\n" for i in ids)
        return ("tag,id,note,n\r\n" + lines).encode()

    put(moto_server, s3_bucket, "in/a.csv", body(range(1, 400)))
    put(moto_server, s3_bucket, "in/b.csv.gz", gzip.compress(body(range(400, 800))))
    staged, direct, plan = both_ways(
        mysql_db, moto_server, s3_bucket, chunk_size=1500, quoted_newlines=False
    )
    assert sum(1 for c in plan.manifest.chunks if c.byte_range) > 2  # cut in byte ranges
    assert direct == staged
    assert not any(row[1] and row[1].endswith("\r") for row in direct)


@pytest.mark.parametrize(
    "fmt",
    [FileFormat(header=True, null="NA"), FileFormat(header=True, delimiter="\t")],
    ids=["null-NA", "tab"],
)
def test_other_null_strings_and_delimiters_load_as_staged(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, fmt: FileFormat
) -> None:
    d = fmt.delimiter
    rows = [
        ["1", "NA", "NA", "1"],
        ["2", '"NA"', "", "2"],
        ["3", "NULL", '""', "NA" if fmt.null else ""],
        ["4", '"x' + d + 'y"', "NAN", "4"],
    ]
    body = d.join(["id", "note", "tag", "n"]) + "\n" + "".join(d.join(r) + "\n" for r in rows)
    put(moto_server, s3_bucket, "in/a.csv", body.encode())
    staged, direct, _ = both_ways(mysql_db, moto_server, s3_bucket, file_format=fmt)
    assert direct == staged


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_random_records_load_as_staged(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, seed: int
) -> None:
    """Fields drawn from the awkward cases, quoted or not at random, cut in byte ranges (line
    ends inside quoted values with the first seed only, so the other seeds' cuts hold)."""
    rng = random.Random(seed)
    pieces = ["", "NULL", "null", ",", '"', "a", " ", "\\", "é", "NA", "\t", "\\N"]
    if seed == 21:
        pieces += ["\n", "\r\n"]

    def field(value: str | None) -> str:
        if value is None:
            return ""
        must = any(c in value for c in ',"\r\n') or value == ""
        if must or rng.random() < 0.3:
            return '"' + value.replace('"', '""') + '"'
        return value

    lines = ["id,note,tag,n"]
    for i in range(1, 1500):
        note = None if rng.random() < 0.2 else "".join(rng.choices(pieces, k=rng.randint(0, 4)))
        tag = None if rng.random() < 0.2 else rng.choice(["", "NULL", "x", "NULLNULL"])
        n = "" if rng.random() < 0.2 else str(i)
        lines.append(",".join([str(i), field(note), field(tag), n]))
    body = "\r\n".join(lines) if rng.random() < 0.5 else "\n".join(lines)
    put(moto_server, s3_bucket, "in/a.csv", body.encode())
    try:
        staged, direct, _ = both_ways(
            mysql_db, moto_server, s3_bucket, chunk_size=4000, quoted_newlines=False
        )
    except ChunkLoadError as exc:  # a cut inside a quoted value is refused, never mis-split
        assert "quoted_newlines=True" in str(exc)
        assert seed == 21
        staged, direct, _ = both_ways(
            mysql_db, moto_server, s3_bucket, prefix="whole_", quoted_newlines=True
        )
    assert len(direct) == 1499
    assert direct == staged
