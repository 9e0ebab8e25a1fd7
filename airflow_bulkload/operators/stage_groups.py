"""Staging mapped across workers: plan the groups, stage each in a task of its own, collect.

::

    plan = PlanStagingOperator(task_id="stage", source=..., staging=..., table=...,
                               group_size="4GB")
    groups = StageGroupOperator.partial(task_id="stage_group").expand(group=plan.output)
    collect = CollectStagingOperator(task_id="collect_staging", groups=plan.output,
                                     manifest=plan.output_manifest_uri)
    plan >> groups >> collect
    LoadChunkOperator.partial(...).expand(chunk=collect.output)

An input that fits one group (and every direct load) is staged by the plan task itself: it
returns no groups, ``stage_group`` maps to nothing, and ``collect_staging`` returns the chunks.
See :mod:`~airflow_bulkload.staging.groups`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context, XComArg
from airflow.sdk.definitions.xcom_arg import PlainXComArg

from airflow_bulkload.operators.base import StagingWorkerOperator
from airflow_bulkload.operators.stage import (
    MANIFEST_URI_XCOM_KEY,
    StageToS3Operator,
    airflow_max_map_length,
    work_owner,
)
from airflow_bulkload.s3io import s3_client
from airflow_bulkload.staging.groups import collected_manifest, stage_group
from airflow_bulkload.staging.planning import parse_size

DEFAULT_GROUP_SIZE = "4GB"


def _group_bytes(group_size: str | int | None) -> int | None:
    """``None`` (also its text, from a template) means one staging task; else a positive size."""
    if group_size is None or str(group_size).strip().lower() in ("", "none"):
        return None
    size = parse_size(group_size)
    if size < 1:
        raise ValueError(f"stage_group_size must be a positive size or None, got {group_size!r}")
    return size


class PlanStagingOperator(StageToS3Operator):
    """Plan staging in groups of input files, one task each; stage a small input at once.

    Takes every argument of :class:`~airflow_bulkload.operators.stage.StageToS3Operator`.
    An input that needs a rewrite and is larger than ``group_size`` (uncompressed, estimated)
    is cut, in listing order, into groups of files of at most that size; the task returns them
    (``StagingGroup`` dicts) for ``StageGroupOperator.partial(...).expand(group=plan.output)``.
    Otherwise it stages the input itself, exactly as ``StageToS3Operator``, and returns ``[]``.
    Either way it pushes the input's manifest URI under ``manifest_uri``.

    :param group_size: the most input one staging task stages (default ``"4GB"``); a task's
        temp disk is about 1x (2x sorted) its group. A single file larger than it is a group of
        its own. ``None``: never group.
    """

    template_fields: Sequence[str] = (*StageToS3Operator.template_fields, "group_size")

    def __init__(self, *, group_size: str | int | None = DEFAULT_GROUP_SIZE, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group_size = group_size

    @property
    def output_manifest_uri(self) -> XComArg:
        return PlainXComArg(self, key=MANIFEST_URI_XCOM_KEY)

    def execute(self, context: Context) -> list[dict[str, Any]]:
        group_bytes = _group_bytes(self.group_size)
        return [group.to_dict() for group in self.stage(context, group_bytes).groups]


class StageGroupOperator(StagingWorkerOperator):
    """Stage one group of input files (mapped over :class:`PlanStagingOperator`'s output).

    Writes the group's chunks and its own ``manifest.json`` under the group's prefix; a re-run
    of a staged group does nothing, and one an interrupted attempt left half done is cleared
    and staged again. Returns ``{"group", "chunks", "rows"}``.

    :param group: a ``StagingGroup`` dict.
    :param aws_conn_id: AWS connection for the input and the staging bucket.
    :param temp_dir: local working directory (default: the system temp dir).
    :param duckdb_memory_limit: DuckDB's memory limit; it spills to ``temp_dir`` beyond it.
    :param duckdb_threads: DuckDB threads (default: all cores).
    :param check_temp_space: fail early when ``temp_dir`` lacks the estimated space.
    """

    template_fields: Sequence[str] = ("group", "temp_dir")
    ui_color = "#fff2cc"

    def __init__(
        self,
        *,
        group: dict[str, Any],
        aws_conn_id: str | None = "aws_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.group = group
        self.aws_conn_id = aws_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        manifest = stage_group(
            self.group,
            s3=s3_client(self.aws_conn_id),
            resources=self.staging_resources(),
            work_owner=work_owner(context),
        )
        return {
            "group": self.group["index"],
            "chunks": len(manifest.chunks),
            "rows": manifest.total_rows,
        }


class CollectStagingOperator(BaseOperator):
    """Write the input's manifest from its groups' and return its chunks, for the load tasks.

    With no groups (the plan task staged the input itself) it reads the manifest. Pushes the
    manifest URI under ``manifest_uri`` like the staging operators.

    :param groups: :class:`PlanStagingOperator`'s output.
    :param manifest: the input's manifest URI (the plan task's ``manifest_uri``).
    :param aws_conn_id: AWS connection for the staging bucket.
    """

    template_fields: Sequence[str] = ("groups", "manifest")
    ui_color = "#fff2cc"

    def __init__(
        self,
        *,
        groups: list[dict[str, Any]],
        manifest: str,
        aws_conn_id: str | None = "aws_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.groups = groups
        self.manifest = manifest
        self.aws_conn_id = aws_conn_id

    def execute(self, context: Context) -> list[dict[str, Any]]:
        manifest = collected_manifest(
            self.groups,
            self.manifest,
            s3=s3_client(self.aws_conn_id),
            max_map_length=airflow_max_map_length(),
        )
        context["ti"].xcom_push(key=MANIFEST_URI_XCOM_KEY, value=self.manifest)
        return [chunk.to_dict() for chunk in manifest.chunks]
