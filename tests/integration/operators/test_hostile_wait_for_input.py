"""Hostile bulk_load_table(wait_for_input=...): the sensor waits for other keys than staging reads.

``pipeline_args.input_key_patterns`` turns each source into an ``S3KeySensor`` wildcard pattern
by appending ``*`` when the source ends in ``/``. The sensor's ``fnmatch`` ``*`` crosses ``/`` and
matches a folder marker, while staging (``sources.list_s3``) reads a prefix's own objects only,
skips folder markers, keeps a glob's ``*`` within one level, and reads ``s3://b/day`` as the
folder ``day/``. So the sensor passes on keys staging will never read (the run then fails in
staging with ``NoInputError`` instead of waiting), and waits out its timeout on input staging
would read.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from airflow_bulkload.pipeline import bulk_load_table
from airflow_bulkload.staging.sources import NoInputError, resolve_sources
from tests.harness import MotoServer, unique_name
from tests.integration.operators.test_wait_for_input import run_the_wait


def _put(moto: MotoServer, bucket: str, key: str, body: bytes = b"id\n1\n") -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def test_a_prefix_without_a_trailing_slash_never_sees_its_folders_objects(
    airflow_db: Path, moto_server: MotoServer, s3_bucket: str
) -> None:
    """``source="s3://b/events/{{ ds }}"`` (no slash): staging reads the folder ``events/<ds>/``.

    Found: the sensor's pattern stays ``events/2026-11-21`` (an exact key, no such object), so
    it waits out its timeout and fails the run although ``events/2026-11-21/part-0.csv`` is
    there and staging would read it. Expected: the wait passes, as it does with the slash.
    """
    _put(moto_server, s3_bucket, "events/2026-11-21/part-0.csv")
    source = f"s3://{s3_bucket}/events/2026-11-21"
    assert [s.location for s in resolve_sources(source, moto_server.client("s3"))] == [
        f"s3://{s3_bucket}/events/2026-11-21/part-0.csv"
    ]  # staging reads it

    assert run_the_wait(f"s3://{s3_bucket}/events/{{{{ ds }}}}", timedelta(seconds=2)) == (
        "success"
    )


def test_a_templated_source_that_renders_a_prefix_never_sees_its_objects(
    airflow_db: Path, moto_server: MotoServer, s3_bucket: str
) -> None:
    """``source="s3://b/{{ params.folder }}"`` rendering ``s3://b/events/2026-11-21/``.

    Found: the trailing-slash check runs on the unrendered text (ends in ``}}``), no ``*`` is
    added, and the rendered pattern ``events/2026-11-21/`` matches no data object: the wait
    fails the run. Expected: success (the prefix holds input staging reads).
    """
    _put(moto_server, s3_bucket, "events/2026-11-21/part-0.csv")
    params = {"folder": "events/2026-11-21/"}

    assert (
        run_the_wait(f"s3://{s3_bucket}/{{{{ params.folder }}}}", timedelta(seconds=2), params)
        == "success"
    )


@pytest.mark.parametrize(
    ("source", "key"),
    [
        ("events/{{ ds }}/", "events/2026-11-21/"),  # the console's "Create folder" marker
        ("events/{{ ds }}/", "events/2026-11-21/archive/part-0.csv"),  # a nested folder
        ("events/{{ ds }}/*.csv", "events/2026-11-21/old/part-0.csv"),  # * is one level
    ],
    ids=["folder-marker", "nested-folder", "glob-one-level"],
)
def test_the_wait_passes_on_keys_staging_does_not_read(
    source: str, key: str, airflow_db: Path, moto_server: MotoServer, s3_bucket: str
) -> None:
    """Found: the wait succeeds (fnmatch's ``*`` matches ``""`` and crosses ``/``), then the
    stage task fails with NoInputError 'matched no files' instead of the run waiting for the
    input. Expected: the wait keeps waiting (here: times out, 'failed'), as staging finds no input.
    """
    _put(moto_server, s3_bucket, key, b"" if key.endswith("/") else b"id\n1\n")
    rendered = f"s3://{s3_bucket}/" + source.replace("{{ ds }}", "2026-11-21")
    with pytest.raises(NoInputError):
        resolve_sources(rendered, moto_server.client("s3"))  # staging reads nothing

    assert run_the_wait(f"s3://{s3_bucket}/{source}", timedelta(seconds=2)) == "failed"


def test_a_source_that_is_all_template_is_refused_as_a_local_path() -> None:
    """``source="{{ params.src }}"`` (the stage task renders it: ``source`` is a template field).

    Found: ``bulk_load_table`` raises at DAG parse ``ValueError: wait_for_input waits for S3
    input, not local paths: ['{{ params.src }}']`` -- the unrendered template is judged as a
    path. Expected: the group builds, and the sensor renders the source (refusing a local path,
    if it is one, when it runs).
    """
    from airflow.sdk import DAG

    with DAG(
        unique_name("wait"),
        schedule=None,
        start_date=datetime(2026, 1, 1),
        params={"src": "s3://bucket/events/"},
    ):
        bulk_load_table(
            table="public.events",
            conn_id="unused",
            source="{{ params.src }}",
            staging="s3://unused-staging/staging",
            wait_for_input=timedelta(minutes=5),
        )
