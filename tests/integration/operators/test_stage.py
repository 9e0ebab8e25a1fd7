"""StageToS3Operator run by Airflow for real (dag.test()), feeding a mapped task."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.staging.manifest import Manifest
from tests.harness import MotoServer, TestDatabase, run_dag_source, unique_name
from tests.staged_csv import write_csv

DAG_SOURCE = """
import json
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, XComArg, task

from airflow_bulkload.operators import StageToS3Operator

OUT = Path({out!r})

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    staged = StageToS3Operator(task_id="stage", **json.loads({kwargs!r}))

    @task
    def record_chunk(chunk):
        (OUT / f"chunk-{{chunk['index']}}.json").write_text(json.dumps(chunk))
        return int(chunk["rows"])

    @task
    def record_manifest(uri):
        (OUT / "manifest_uri").write_text(uri)

    record_chunk.expand(chunk=staged.output)
    record_manifest(XComArg(staged, key="manifest_uri"))
"""


def _run_dag(operator_kwargs: dict[str, Any], out_dir: Path) -> Any:
    dag_id = unique_name("stage_dag")
    source = DAG_SOURCE.format(out=str(out_dir), dag_id=dag_id, kwargs=json.dumps(operator_kwargs))
    return run_dag_source(
        source, dag_id, out_dir.parent / "dags", logical_date=datetime(2026, 1, 1, tzinfo=UTC)
    )


def test_stage_operator_maps_chunks_and_pushes_the_manifest_uri(
    airflow_db: Path, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    ids = list(range(1, 301))
    random.Random(3).shuffle(ids)
    source = write_csv(tmp_path / "in.csv", [(str(i), f"v{i}") for i in ids], header=["id", "v"])
    out = tmp_path / "out"
    out.mkdir()
    run = _run_dag(
        {
            "source": str(tmp_path / "*.csv"),
            "staging": f"s3://{s3_bucket}/staging",
            "table": "public.events",
            "file_format": {"header": True},
            "sort_key": ["id"],
            "sort_key_types": {"id": "bigint"},
            "chunk_size": "500B",
        },
        out,
    )
    assert str(run.state) in ("success", "DagRunState.SUCCESS")
    chunks = sorted(
        (json.loads(p.read_text()) for p in out.glob("chunk-*.json")), key=lambda c: c["index"]
    )
    manifest_uri = (out / "manifest_uri").read_text()
    bucket, _, key = manifest_uri.removeprefix("s3://").partition("/")
    manifest = Manifest.from_json(
        moto_server.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    )
    assert len(chunks) == len(manifest.chunks) > 3
    assert [c["uri"] for c in chunks] == [c.uri for c in manifest.chunks]
    assert sum(c["rows"] for c in chunks) == 300 == manifest.total_rows
    assert chunks[0]["first_key"] == ["1"] and chunks[-1]["last_key"] == ["300"]
    assert chunks[0]["columns"] == ["id", "v"]
    assert "/public.events/" in manifest_uri
    assert source.exists()


def test_sort_key_from_the_table_primary_key(
    airflow_db: Path, pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    pytest.importorskip("airflow_bulkload.dialects.postgres")
    pg_db.query("CREATE TABLE events (grp int, name text, v text, PRIMARY KEY (grp, name))")
    rows = [(str(g), f"n{n}", "x") for g in (100, 9, 20) for n in (3, 1, 2)]
    write_csv(tmp_path / "in.csv", rows, header=["grp", "name", "v"])
    out = tmp_path / "out"
    out.mkdir()
    run = _run_dag(
        {
            "source": str(tmp_path / "in.csv"),
            "staging": f"s3://{s3_bucket}/staging",
            "table": "public.events",
            "file_format": {"header": True},
            "sort_by_primary_key": True,
            "conn_id": pg_db.conn_id,
            "chunk_size": 1,
        },
        out,
    )
    assert str(run.state) in ("success", "DagRunState.SUCCESS")
    chunks = sorted(
        (json.loads(p.read_text()) for p in out.glob("chunk-*.json")), key=lambda c: c["index"]
    )
    keys = [tuple(c["first_key"]) for c in chunks]
    assert keys == sorted(keys, key=lambda k: (int(k[0]), k[1]))
    assert keys[0] == ("9", "n1") and keys[-1] == ("100", "n3")


def test_every_staged_object_is_written_with_the_extra_args(
    airflow_db: Path, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """A bucket whose policy requires SSE-KMS takes staging's chunks and manifest."""
    write_csv(tmp_path / "in.csv", [(str(i), f"v{i}") for i in range(200)], header=["id", "v"])
    out = tmp_path / "out"
    out.mkdir()
    run = _run_dag(
        {
            "source": str(tmp_path / "in.csv"),
            "staging": f"s3://{s3_bucket}/staging",
            "table": "public.events",
            "file_format": {"header": True},
            "chunk_size": "500B",
            "staging_extra_args": {
                "ServerSideEncryption": "aws:kms",
                "SSEKMSKeyId": "alias/etl",
                "Metadata": {"owner": "bulkload"},
            },
        },
        out,
    )
    assert str(run.state) in ("success", "DagRunState.SUCCESS")
    s3 = moto_server.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert any(k.endswith("manifest.json") for k in keys) and len(keys) > 3
    for key in keys:
        head = s3.head_object(Bucket=s3_bucket, Key=key)
        assert head["ServerSideEncryption"] == "aws:kms", key
        assert head["SSEKMSKeyId"].endswith("alias/etl"), (key, head["SSEKMSKeyId"])
        assert head["Metadata"] == {"owner": "bulkload"}, key


def test_extra_args_s3_uploads_do_not_take_are_refused_before_reading(
    airflow_db: Path, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run = _run_dag(
        {
            "source": f"s3://{s3_bucket}/nothing-here/",
            "staging": f"s3://{s3_bucket}/staging",
            "table": "public.events",
            # ContentType is staging's own; Bucket is no upload argument at all
            "staging_extra_args": {"ContentType": "text/plain", "Bucket": "elsewhere"},
        },
        out,
    )
    assert "failed" in str(run.state)
    assert "Contents" not in moto_server.client("s3").list_objects_v2(Bucket=s3_bucket)


def test_parquet_is_checked_against_the_table_the_operator_describes(
    airflow_db: Path, pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """The operator hands staging the table's columns and types: a column the table lacks
    fails the task before anything is staged; the columns it has stage, named by the file."""
    import duckdb

    pg_db.query("CREATE TABLE events (id bigint PRIMARY KEY, v text)")
    good, bad = tmp_path / "good", tmp_path / "bad"
    for folder, select in ((good, "i AS id, 'v' || i AS v"), (bad, "i AS id, i AS other")):
        folder.mkdir()
        duckdb.connect().execute(
            f"COPY (SELECT {select} FROM range(50) r(i)) TO '{folder / 'p.parquet'}' "
            "(FORMAT parquet)"
        )
    runs = {}
    for folder in (good, bad):
        out = tmp_path / f"out-{folder.name}"
        out.mkdir()
        runs[folder.name] = _run_dag(
            {
                "source": str(folder / "p.parquet"),
                "staging": f"s3://{s3_bucket}/staging-{folder.name}",
                "table": "public.events",
                "file_format": {"format": "parquet"},
                "conn_id": pg_db.conn_id,
            },
            out,
        )
    assert str(runs["good"].state) in ("success", "DagRunState.SUCCESS")
    [chunk] = [json.loads(p.read_text()) for p in (tmp_path / "out-good").glob("chunk-*.json")]
    assert chunk["columns"] == ["id", "v"] and chunk["rows"] == 50
    assert "failed" in str(runs["bad"].state)


def _staged_chunks(out: Path) -> list[dict[str, Any]]:
    return sorted(
        (json.loads(p.read_text()) for p in out.glob("chunk-*.json")), key=lambda c: c["index"]
    )


def _manifest_at(moto_server: MotoServer, out: Path) -> Manifest:
    bucket, _, key = (out / "manifest_uri").read_text().removeprefix("s3://").partition("/")
    return Manifest.from_json(
        moto_server.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    )


@pytest.mark.parametrize("in_order", [True, False], ids=["in_order", "declared_wrongly"])
def test_presorted_input_is_not_sorted_and_the_manifest_says_its_order(
    airflow_db: Path,
    mysql_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    tmp_path: Path,
    in_order: bool,
) -> None:
    """MySQL would sort by the key: declared presorted, the input's own order is kept (a wrong
    declaration loads the same rows, only slower), and the manifest records the order pre-flight
    reads."""
    mysql_db.query("CREATE TABLE events (id int PRIMARY KEY, v text)")
    ids = list(range(1, 201))
    if not in_order:
        random.Random(5).shuffle(ids)
    write_csv(tmp_path / "a.csv", [(str(i), f"v{i}") for i in ids[:100]], header=["id", "v"])
    write_csv(tmp_path / "b.csv", [(str(i), f"v{i}") for i in ids[100:]], header=["id", "v"])
    out = tmp_path / "out"
    out.mkdir()
    run = _run_dag(
        {
            "source": str(tmp_path / "*.csv"),
            "staging": f"s3://{s3_bucket}/staging",
            "table": "events",
            "file_format": {"header": True},
            "sort_by_primary_key": "presorted",
            "conn_id": mysql_db.conn_id,
            "chunk_size": "400B",
        },
        out,
    )
    assert str(run.state) in ("success", "DagRunState.SUCCESS")
    chunks = _staged_chunks(out)
    assert len(chunks) > 3
    # nothing sorted: the chunks hold the input's records in the input's order
    assert chunks[0]["first_key"] == [str(ids[0])]
    assert chunks[-1]["last_key"] == [str(ids[-1])]
    assert sum(c["rows"] for c in chunks) == 200
    manifest = _manifest_at(moto_server, out)
    assert manifest.sort_key == ["id"] and not manifest.sort_key_types
