"""Hostile round 3: without a header, the first record decides which records are "bad".

did: header=False, no columns= (the table's 3 columns known as table_columns, as the operator
    passes them), max_errors=5; input ``0,a,b,c`` (one field too many) then 5 good records.
happened: DuckDB's sniff takes 4 columns from the first record: the bad record is staged
    (``0,a,b,c``, total_rows 1) and the 5 good records are set aside as "MISSING COLUMNS
    Expected Number of Columns: 4 Found: 3"; the load then fails on the 4-field chunk, and the
    rejects file lists the good rows.
should: the table's column count (or the dominant shape) decides; the one 4-field record is set
    aside and the 5 good ones staged.
"""

from __future__ import annotations

from airflow_bulkload.staging.manifest import FileFormat
from tests.harness import MotoServer
from tests.integration.staging.test_rejects import plan, put


def test_a_bad_first_record_does_not_set_aside_the_good_ones(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    good = b"".join(b"%d,a,%d\n" % (i, i) for i in range(1, 6))
    put(moto_server, s3_bucket, "in/a.csv", b"0,a,b,c\n" + good)

    staged = plan(
        moto_server,
        s3_bucket,
        file_format=FileFormat(header=False),
        table_columns=["id", "note", "n"],
        max_errors=5,
    )

    assert staged.manifest is not None
    assert (staged.manifest.total_rows, staged.manifest.rejected_rows) == (5, 1)
