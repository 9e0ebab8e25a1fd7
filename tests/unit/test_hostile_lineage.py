"""Hostile inputs to the OpenLineage naming functions."""

from __future__ import annotations

from airflow_bulkload.lineage import MAX_INPUT_DATASETS, input_dataset_names


def test_local_input_files_do_not_break_the_report_lineage() -> None:
    """What I did: StageToS3Operator/bulk_load_table with a local source (list_local: staging
    takes local paths and globs); LoadReportOperator's lineage passes the manifest's
    ``sources`` (staged_manifest writes s.location: absolute local paths) to input_dataset_names.

    What happened: ValueError "not an S3 URI (expected s3://bucket/key): '/data/in/a.csv'"
    from get_openlineage_facets_on_complete, so the report task emits no lineage at all.

    What should happen: local inputs are named (namespace file://<host> or file, name the
    path, OpenLineage's convention), or skipped; S3 ones still named.
    """
    names = input_dataset_names(["/data/in/a.csv", "s3://b/in/b.csv"])
    assert ("s3://b", "in/b.csv") in names


def test_an_object_alone_in_its_bucket_is_not_widened_to_the_whole_bucket() -> None:
    """What I did: 100 objects of one bucket plus one object at the root of another bucket
    (101 > MAX_INPUT_DATASETS, so names are collapsed per bucket).

    What happened: [('s3://b', 'day=1/'), ('s3://other', '/')]: the single object read from
    s3://other is reported as the whole bucket.

    What should happen: a bucket contributing one object keeps that object's name
    (its "common prefix" is the key itself).
    """
    uris = [f"s3://b/day=1/part-{i}.csv" for i in range(MAX_INPUT_DATASETS)]
    uris.append("s3://other/solo.csv")
    assert ("s3://other", "solo.csv") in input_dataset_names(uris)
