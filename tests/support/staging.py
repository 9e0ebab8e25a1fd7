"""Stage ``s3://<bucket>/in/`` as a test's input, the way every staging test does."""

from __future__ import annotations

from typing import Any

from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StageResult, StagingOptions, stage
from tests.harness import MotoServer


def stage_input(
    moto: MotoServer,
    bucket: str,
    *,
    table: str = "notes",
    group_bytes: int | None = None,
    **options: Any,
) -> StageResult:
    """Stage the objects under ``in/`` for ``table`` (a nightly run of 2026-11-21) with
    ``options`` over a CSV-with-header default."""
    return stage(
        f"s3://{bucket}/in/",
        s3=moto.client("s3"),
        staging_uri=f"s3://{bucket}/staging",
        dag_id="nightly",
        table=table,
        run="2026-11-21",
        options=StagingOptions(**({"file_format": FileFormat(header=True)} | options)),
        group_bytes=group_bytes,
    )
