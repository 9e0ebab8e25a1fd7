"""The staging front of :func:`~airflow_bulkload.pipeline.bulk_load_table`.

One ``stage`` task, or, with ``stage_group_size``, a plan task, one mapped ``stage_group`` task
per group of input files and ``collect_staging``; an optional ``wait_for_input`` sensor before
them. The rest of the group reads only what this hands over: the chunk specs and the manifest URI.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.definitions.xcom_arg import PlainXComArg, XComArg

from airflow_bulkload.operators import (
    CollectStagingOperator,
    PlanStagingOperator,
    StageGroupOperator,
    StageToS3Operator,
    WaitForInputSensor,
)
from airflow_bulkload.operators.stage import MANIFEST_URI_XCOM_KEY
from airflow_bulkload.pipeline_args import GROUP_MAP_INDEX, accepted_by, check_waitable, with_extra
from airflow_bulkload.task_docs import TASK_DOCS

#: what the staging front hands the rest of the group: the task whose output is the chunk list
#: (``stage``, the plan task with groups), the chunk specs, the manifest URI, and report name ->
#: task id of the staging tasks besides ``stage`` (``stage_group``, ``collect_staging``)
StagingFront = tuple[BaseOperator, XComArg, XComArg, dict[str, str]]


def add_staging(
    *,
    source: str | list[str],
    staging: str,
    table: str,
    aws_conn_id: str | None,
    stage_arguments: dict[str, Any],
    stage_kwargs: dict[str, Any] | None,
    stage_group_size: str | int | None,
    wait_for_input: timedelta | None,
    retries: int,
    retry_delay: timedelta,
    timing: dict[str, Any],
) -> StagingFront:
    """Add the staging tasks to the current task group and say what they hand on (``StagingFront``).

    ``stage_arguments`` are the stage task's own (already merged with ``stage_kwargs``); the
    mapped ``stage_group`` tasks take the entries of ``stage_kwargs`` their operator accepts, and
    ``retries``/``retry_delay`` (a group is staged again from scratch).
    """
    front: StagingFront
    arguments = {"source": source, "staging": staging, "table": table, **stage_arguments}
    if stage_group_size is None:
        stage = StageToS3Operator(task_id="stage", **arguments)
        front = (stage, stage.output, PlainXComArg(stage, key=MANIFEST_URI_XCOM_KEY), {})
    else:
        stage = PlanStagingOperator(task_id="stage", group_size=stage_group_size, **arguments)
        # an input larger than a group is staged by one mapped task per group, then collected
        stage_groups = StageGroupOperator.partial(
            task_id="stage_group",
            **with_extra(
                {
                    "aws_conn_id": aws_conn_id,
                    "map_index_template": GROUP_MAP_INDEX,
                    "doc_md": TASK_DOCS["stage_group"],
                    # a group is staged again from scratch: a lost worker costs one retry
                    "retries": retries,
                    "retry_delay": retry_delay,
                    **timing,
                },
                accepted_by(StageGroupOperator, stage_kwargs),
                "stage_kwargs",
            ),
        ).expand(group=stage.output)
        collect = CollectStagingOperator(
            task_id="collect_staging",
            groups=stage.output,  # type: ignore[arg-type]  # an XComArg, resolved at run time
            manifest=stage.output_manifest_uri,  # type: ignore[arg-type]
            aws_conn_id=aws_conn_id,
            # no groups (a small input, staged by the plan task) skips stage_group, not this
            trigger_rule="none_failed",
            **timing,
        )
        stage_groups >> collect
        more = {"stage_group": stage_groups.task_id, "collect_staging": collect.task_id}
        front = (stage, collect.output, PlainXComArg(collect, key=MANIFEST_URI_XCOM_KEY), more)
    if wait_for_input is not None:
        check_waitable(source)
        wait = WaitForInputSensor(
            task_id="wait_for_input",
            source=source,
            aws_conn_id=aws_conn_id,
            timeout=wait_for_input.total_seconds(),
            poke_interval=min(60.0, max(5.0, wait_for_input.total_seconds() / 10)),
            mode="reschedule",
        )
        wait >> stage
    return front
