"""Hostile round 3: a bad sort key value after a set-aside record escapes as a raw DuckDB error.

did: ``id,note,n`` / ``1,a,1`` / ``2,bad`` / ``xx,c,3``, sort_key=["id"] (BIGINT), max_errors=5.
happened: the sort's cast fails, and _bad_key_error re-reads the input without set_aside: it
    raises ``duckdb.InvalidInputException: CSV Error on Line: 3 / Original Line: 2,bad /
    Expected Number of Columns: 3 Found: 2 ... file = /tmp/.../input-000000.csv`` (not an
    InputFormatError, naming the record max_errors sets aside and the worker's temp file).
should: InputFormatError naming the input and the bad key: "s3://.../a.csv: sort key column
    'id' holds 'xx' (expected a value of type BIGINT)", as without the set-aside record.
"""

from __future__ import annotations

import pytest

from airflow_bulkload.staging.normalize import InputFormatError
from tests.harness import MotoServer
from tests.integration.staging.test_rejects import plan, put


def test_a_bad_key_after_a_set_aside_record_is_named(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,1\n2,bad\nxx,c,3\n")

    with pytest.raises(InputFormatError, match=r"a\.csv: sort key column 'id' holds 'xx'"):
        plan(moto_server, s3_bucket, max_errors=5, sort_key=["id"], sort_types=["BIGINT"])
