"""Hostile round 3: every staging run writes the same file name into ``reject_uri``.

did: two stagings with the documented ``reject_uri="s3://bucket/rejects/{{ ds }}/"`` on the same
    day: table t1 (bad record ``2,bad``) then table t2 (bad record ``9,zzz``); likewise two
    tables staged in groups.
happened: both manifests name ``s3://bucket/rejects/<ds>/rejects.csv`` (groups:
    ``group-00000-rejects.csv``); t2 overwrote it, so t1's manifest, report and Asset event
    point at a file that lists only t2's ``9,zzz``: t1's set-aside record is listed nowhere.
should: each staging run's rejects file has a name of its own (table / fingerprint), so one
    run never overwrites another's.
"""

from __future__ import annotations

from tests.harness import MotoServer
from tests.integration.staging.test_rejects import put, read_rejects
from tests.support.staging import stage_input


def test_two_tables_staged_into_one_reject_uri_keep_their_own_rejects(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    reject_uri = f"s3://{s3_bucket}/rejects/2026-11-21/"
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,1\n2,bad\n3,c,3\n")
    first = stage_input(moto_server, s3_bucket, table="t1", max_errors=5, reject_uri=reject_uri)
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,1\n2,c,3\n9,zzz\n")
    stage_input(moto_server, s3_bucket, table="t2", max_errors=5, reject_uri=reject_uri)

    assert first.manifest is not None
    listed = [row["record"] for row in read_rejects(moto_server, first.manifest.rejects[0])]
    assert listed == ["2,bad"]  # got ['9,zzz']


def test_two_tables_staged_in_groups_into_one_reject_uri_keep_their_own_rejects(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    from airflow_bulkload.staging.groups import collect_groups, stage_group
    from tests.integration.staging.test_rejects import BAD, body

    s3 = moto_server.client("s3")
    reject_uri = f"s3://{s3_bucket}/rejects/2026-11-21/"

    def staged(table: str, bad_line: int) -> list[str]:
        put(moto_server, s3_bucket, "in/a.csv", body({bad_line: BAD[100]}))
        put(moto_server, s3_bucket, "in/b.csv", body({}))
        planned = stage_input(
            moto_server,
            s3_bucket,
            table=table,
            group_bytes=40_000,
            chunk_size=20_000,
            max_errors=5,
            reject_uri=reject_uri,
        )
        for group in planned.groups:
            stage_group(group, s3=s3)
        return collect_groups(planned.groups, s3=s3).rejects

    first = staged("t1", 100)
    second = staged("t2", 200)

    assert first != second  # both: [.../rejects/2026-11-21/group-00000-rejects.csv]
    assert int(read_rejects(moto_server, first[0])[0]["line"]) == 101  # got 201 (t2's)
