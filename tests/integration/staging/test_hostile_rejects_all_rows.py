"""Hostile round 3: an input whose every record is set aside is reported as an empty input.

did: ``id,note,n`` then three records of two fields each, max_errors=5; staged, loaded and
    verified (BulkLoadHook.verify_load, what the report task calls).
happened: verify_load returns ``input_empty: True`` next to ``rejected_rows: 3``; the report
    then prints "**Input empty: 0 rows loaded.** Check that the day's export arrived." and the
    Asset event says ``input_empty: True``, though the export arrived with 3 records.
should: input_empty is False (the input had records; all were set aside); the report says so.
"""

from __future__ import annotations

from tests.harness import MotoServer, TestDatabase
from tests.integration.staging.test_rejects import create_notes, load, plan, put


def test_every_record_set_aside_is_not_an_empty_input(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_notes(pg_db)
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a\n2,bad\n3,c\n")

    verification = load(pg_db, plan(moto_server, s3_bucket, max_errors=5))

    assert verification["rejected_rows"] == 3
    assert verification["input_empty"] is False
