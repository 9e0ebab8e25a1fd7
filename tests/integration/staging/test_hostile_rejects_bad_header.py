"""Hostile round 3: with max_errors, a header that is not in the input's encoding is skipped and
the first data record becomes the header.

did: UTF-8 declared, header ``id,n\\xf6te,n`` (a Latin-1 byte), records ``1,a,1`` / ``2,b,2``,
    max_errors=5.
happened: the sniff (ignore_errors) skips the header line and names the columns after the
    first record: ``manifest.columns == ['1', 'a', '1_1']``, 2 rows staged, 0 rejected, no
    error; the load then fails on columns the table does not have (or, worse, matches them).
    With max_errors=0 the same file fails: "CSV Error on Line: 1 Invalid unicode".
should: fail as with max_errors=0 (a header cannot be set aside), or keep the header's names;
    never name columns after a data record.
"""

from __future__ import annotations

import pytest

from airflow_bulkload.staging.normalize import InputFormatError
from tests.harness import MotoServer
from tests.integration.staging.test_rejects import plan, put


def test_a_header_with_a_bad_byte_is_not_replaced_by_the_first_record(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    put(moto_server, s3_bucket, "in/a.csv", b"id,n\xf6te,n\n1,a,1\n2,b,2\n")

    with pytest.raises(InputFormatError, match=r"(?i)line 1|header|unicode"):
        staged = plan(moto_server, s3_bucket, max_errors=5)
        pytest.fail(f"staged with columns {staged.manifest and staged.manifest.columns}")
