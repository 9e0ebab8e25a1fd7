"""The staging front of :func:`~airflow_bulkload.pipeline.bulk_load_table`.

One ``stage`` task (``stage_group_size=None``), or a plan task that stages an input up to
``stage_group_size`` itself and a larger one through one mapped ``stage_group`` task per group of
input files (then ``collect_staging``, where the loads map over chunks); an optional
``wait_for_input`` sensor before them. The rest of the group reads only what this hands over:
the chunk specs and the manifest URI.

When the rest reads the chunks from the manifest (pre-flight's load batches), there is no
``collect_staging`` task: pre-flight writes the input's manifest from the groups' itself, and an
input the plan task staged itself (or loads as stored) maps no ``stage_group`` task, which
Airflow skips without starting it: a small input pays no task launch for the groups.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NamedTuple

from airflow.sdk import BaseOperator
from airflow.sdk.definitions.mappedoperator import MappedOperator
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


class StagingFront(NamedTuple):
    """What the staging front hands the rest of the group."""

    #: the ``stage`` task (the plan task with groups)
    stage: BaseOperator
    #: the chunk specs; ``None`` where the next steps read them from the manifest
    chunks: XComArg | None
    #: the input's manifest URI
    manifest_uri: XComArg
    #: report name -> task id of the staging tasks besides ``stage``
    tasks: dict[str, str]
    #: the task the next step follows (``stage_group`` or ``collect_staging`` with groups)
    last: BaseOperator | MappedOperator
    #: the trigger rule of the next step: where a ``stage_group`` mapped to nothing (skipped)
    #: comes right before it, ``none_failed_min_one_success``; else ``all_success``
    next_trigger_rule: str
    #: the plan task's groups, where the next step (pre-flight) writes the input's manifest
    #: from theirs itself; else ``None``
    groups: XComArg | None = None

    @property
    def chunk_list(self) -> XComArg:
        """``chunks``, for load tasks mapped over the chunks (``chunks_from_manifest=False``)."""
        if self.chunks is None:
            raise ValueError("this staging front hands over the manifest, not a chunk list")
        return self.chunks


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
    chunks_from_manifest: bool = False,
) -> StagingFront:
    """Add the staging tasks to the current task group and say what they hand on (``StagingFront``).

    ``stage_arguments`` are the stage task's own (already merged with ``stage_kwargs``); the
    mapped ``stage_group`` tasks take the entries of ``stage_kwargs`` their operator accepts, and
    ``retries``/``retry_delay`` (a group is staged again from scratch). ``chunks_from_manifest``:
    the next steps read the chunks from the manifest, not from ``chunks``, so pre-flight collects
    the groups and there is no ``collect_staging`` (see the module docstring).
    """
    front: StagingFront
    arguments = {"source": source, "staging": staging, "table": table, **stage_arguments}
    if stage_group_size is None:
        stage = StageToS3Operator(task_id="stage", **arguments)
        manifest_uri = PlainXComArg(stage, key=MANIFEST_URI_XCOM_KEY)
        front = StagingFront(stage, stage.output, manifest_uri, {}, stage, "all_success")
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
        if chunks_from_manifest:
            # pre-flight writes the input's manifest from the groups' itself: no task launch
            # for it, and an input the plan task staged (no groups, stage_group skipped) costs
            # one scheduler pass, not two
            front = StagingFront(
                stage,
                None,
                stage.output_manifest_uri,
                {"stage_group": stage_groups.task_id},
                stage_groups,
                "none_failed_min_one_success",
                groups=stage.output,
            )
        else:
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
            manifest_uri = PlainXComArg(collect, key=MANIFEST_URI_XCOM_KEY)
            front = StagingFront(stage, collect.output, manifest_uri, more, collect, "all_success")
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
