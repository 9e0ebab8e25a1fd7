"""Hostile round 3: max_errors counts DuckDB's reject *errors*, not the records set aside.

did: a 3-column CSV with one record ``abc`` (one field) and two good records, staged with
    max_errors=5; and one record ``4,caf\\xe9,x,y`` (Latin-1 byte *and* a fourth field).
happened: DuckDB stores one reject row per missing column (and one per error kind), and
    rejects.check_and_write counts those rows: ``manifest.rejected_rows == 2`` for 1 record,
    the rejects file lists line 3 twice, rows in (3) != rows staged (2) + rejected (2); with
    max_errors=1 staging fails: "2 records do not read as the input's format, more than
    max_errors (1) ... line 3, column note ...; line 3, column n ...".
should: one record set aside counts once (rejected_rows == 1, one line in the rejects file),
    and max_errors=1 takes it.
"""

from __future__ import annotations

from tests.harness import MotoServer
from tests.integration.staging.test_rejects import plan, put, read_rejects


def test_a_record_missing_two_fields_counts_as_one_rejected_row(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,1\nabc\n3,c,3\n")

    staged = plan(moto_server, s3_bucket, max_errors=5)

    assert staged.manifest is not None
    rows = read_rejects(moto_server, staged.manifest.rejects[0])
    # rows in (3) == staged + set aside
    assert (staged.manifest.total_rows, staged.manifest.rejected_rows, len(rows)) == (2, 1, 1)


def test_max_errors_1_takes_the_one_record_that_misses_two_fields(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,1\nabc\n3,c,3\n")

    staged = plan(moto_server, s3_bucket, max_errors=1)  # raises InputFormatError: "2 records"

    assert staged.manifest is not None and staged.manifest.rejected_rows == 1


def test_a_record_with_bad_bytes_and_an_extra_field_counts_once(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,1\n4,caf\xe9,x,y\n3,c,3\n")

    staged = plan(moto_server, s3_bucket, max_errors=5)

    assert staged.manifest is not None
    assert (staged.manifest.total_rows, staged.manifest.rejected_rows) == (2, 1)
