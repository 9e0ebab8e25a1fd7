"""Hostile round 3: StageToS3Operator's max_errors / reject_uri argument checks.

did: (1) max_errors=True; (2) reject_uri="" (a template such as "{{ params.reject_uri }}"
    whose default is empty), then validate() as execute runs it.
happened: (1) validate() passes and _max_errors() returns 1 (parse_optional_int turns a bool
    into int), though StagingOptions refuses a bool ("max_errors must be a whole number");
    (2) validate() raises "reject_uri must be an S3 folder (s3://bucket/path/): ''", though
    stage() then reads it as ``self.reject_uri or None`` (default: beside the chunks).
should: (1) refused like StagingOptions(max_errors=True); (2) an empty rendered reject_uri
    means the default, as stage() already treats it.
"""

from __future__ import annotations

import pytest

from airflow_bulkload.operators.stage import StageToS3Operator
from airflow_bulkload.staging.options import StagingOptions


def operator(**kwargs: object) -> StageToS3Operator:
    return StageToS3Operator(
        task_id="stage", source="s3://b/in/", staging="s3://b/staging", table="t", **kwargs
    )


def test_max_errors_true_is_refused_as_staging_options_refuses_it() -> None:
    with pytest.raises(ValueError, match="whole number"):
        StagingOptions(max_errors=True)
    with pytest.raises(ValueError, match="max_errors"):
        operator(max_errors=True).validate()


def test_an_empty_rendered_reject_uri_means_the_default() -> None:
    operator(reject_uri="").validate()
