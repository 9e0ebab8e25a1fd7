"""Hostile round 3: the rejects file's ``line`` is a record number, not the file's line.

did: ``id,note,n`` / ``1,"multi<LF>line",1`` / ``2,x,2`` / ``3,bad`` / ``4,y,4``, max_errors=5.
happened: the rejects file says ``line 4`` for ``3,bad``; it stands on line 5 (the quoted
    value before it spans two lines). In a 200 000-record file with 1 % two-line quoted values
    every reported line after the first such value is off (e.g. 3874 for line 3922).
should: the exact line of the file (5), as the over-threshold error and the docs promise.
"""

from __future__ import annotations

import pytest

from airflow_bulkload.staging.normalize import InputFormatError
from tests.harness import MotoServer
from tests.integration.staging.test_rejects import plan, put, read_rejects


def test_a_quoted_line_end_before_a_bad_record_does_not_shift_its_line(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    put(moto_server, s3_bucket, "in/a.csv", b'id,note,n\n1,"multi\nline",1\n2,x,2\n3,bad\n4,y,4\n')

    staged = plan(moto_server, s3_bucket, max_errors=5)

    assert staged.manifest is not None
    [row] = read_rejects(moto_server, staged.manifest.rejects[0])
    assert (row["record"], int(row["line"])) == ("3,bad", 5)


def test_over_max_errors_the_message_counts_lines_in_the_file_too(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    """The error names the first records set aside by their line in the file, as the rejects
    file does (DuckDB's own count is one short after a quoted value over two lines)."""
    put(moto_server, s3_bucket, "in/a.csv", b'id,note,n\n1,"multi\nline",1\n2,x,2\n3,bad\n4,y\n')

    with pytest.raises(InputFormatError, match=r"a\.csv, line 5, .*a\.csv, line 6"):
        plan(moto_server, s3_bucket, max_errors=1)
