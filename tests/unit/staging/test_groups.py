"""``collected_manifest``: one helper for pre-flight and ``collect_staging`` refuses groups that are
not the plan task's, or that write another manifest, before reading or writing anything."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_bulkload.staging.groups import collected_manifest
from airflow_bulkload.staging.planning import StagingGroup

MANIFEST = "s3://b/staging/run/fp/manifest.json"


class _NoS3:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"S3 was called ({name}) before the arguments were checked")


def _group(manifest_uri: str = MANIFEST) -> dict[str, Any]:
    return StagingGroup(
        0, [], "s3://b/staging/run/fp/group-00000-", manifest_uri, "fp", {}
    ).to_dict()


@pytest.mark.parametrize("groups", [str([_group()]), ["group 0"]])
def test_groups_that_are_not_the_plans_group_dicts_are_refused(groups: Any) -> None:
    with pytest.raises(ValueError, match="must be the plan task's list of group dicts"):
        collected_manifest(groups, MANIFEST, s3=_NoS3())


def test_groups_that_write_another_manifest_are_refused() -> None:
    """``CollectStagingOperator`` pushed the URI it was given while writing the groups' own."""
    with pytest.raises(ValueError, match=re.escape("make the manifest s3://b/other/manifest.json")):
        collected_manifest([_group("s3://b/other/manifest.json")], MANIFEST, s3=_NoS3())
