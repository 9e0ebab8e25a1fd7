"""Hostile staging_extra_args values on StageToS3Operator (no servers needed)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_bulkload.operators import StageToS3Operator


def operator(args: Any) -> StageToS3Operator:
    return StageToS3Operator(
        task_id="stage",
        source="s3://b/in/",
        staging="s3://b/staging",
        table="t",
        staging_extra_args=args,
    )


@pytest.mark.parametrize(
    "rendered",
    ["{'ServerSideEncryption': 'aws:kms'}", '{"ServerSideEncryption": "aws:kms"}'],
    ids=["python-repr", "json"],
)
def test_a_templated_dict_rendered_as_text_is_refused_as_text(rendered: str) -> None:
    """What I did: staging_extra_args="{{ var.json.staging_sse }}" (a templated field; without
    render_template_as_native_obj the template renders to the dict's text).

    What happened: ValueError "S3 upload arguments [' ', "'", '2', '5', '6', ':', 'A', 'E',
    'S', 'c', 'd', 'e', ...] are not taken by staging's uploads": the string's characters are
    checked as keys.

    What should happen: an error saying staging_extra_args must be a dict (mapping), got str,
    and pointing at render_template_as_native_obj=True.
    """
    with pytest.raises(ValueError) as failure:
        operator(rendered).validate()
    assert "['" not in str(failure.value).split("are not taken")[0], str(failure.value)[:200]
    assert "dict" in str(failure.value) or "mapping" in str(failure.value)


@pytest.mark.parametrize("args", [["ServerSideEncryption"], 5], ids=["list", "int"])
def test_staging_extra_args_that_are_not_a_dict_are_refused_by_validate(args: Any) -> None:
    """What I did: staging_extra_args=["ServerSideEncryption"] or 5.

    What happened: a list passes validate() (its items are checked as keys) and staging then
    dies in dict() with a raw "ValueError: dictionary update sequence element #0 has length
    20; 2 is required"; an int raises a raw "TypeError: 'int' object is not iterable".

    What should happen: validate() raises ValueError saying staging_extra_args must be a dict.
    """
    with pytest.raises(ValueError, match="staging_extra_args"):
        operator(args).validate()
