"""OpenLineage for an input staged from local files (moto S3 for the staging prefix)."""

from __future__ import annotations

from pathlib import Path

from airflow_bulkload.lineage import input_dataset_names
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StagingOptions, stage
from tests.harness import MotoServer
from tests.integration.test_hostile_gzip import csv_body


def test_the_lineage_of_a_load_staged_from_local_files_names_its_inputs(
    moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """What I did: staged a local CSV (source=/…/in/a.csv, as StageToS3Operator accepts),
    then named the manifest's sources as LoadReportOperator.get_openlineage_facets_on_complete
    does (verification["sources"] is manifest.sources).

    What happened: manifest.sources holds the absolute local path, and input_dataset_names raises
    ValueError "not an S3 URI (expected s3://bucket/key)": the report task's lineage fails.

    What should happen: the local file is named as a file dataset (or left out); no exception.
    """
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_bytes(csv_body(100))
    staged = stage(
        str(tmp_path / "in" / "*.csv"),
        s3=moto_server.client("s3"),
        staging_uri=f"s3://{s3_bucket}/staging",
        dag_id="nightly",
        table="notes",
        run="2026-11-21",
        options=StagingOptions(file_format=FileFormat(header=True)),
    )
    assert staged.manifest is not None
    assert staged.manifest.sources == [str(tmp_path / "in" / "a.csv")]
    names = input_dataset_names(staged.manifest.sources)
    assert len(names) == 1
