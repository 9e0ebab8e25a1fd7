"""bulk_load_table(): the whole expert bulk load of one table, as one Airflow TaskGroup.

::

    stage [─► stage_group x N (mapped), for input above stage_group_size]
          ─► preflight (after groups, first the input's manifest from theirs)
          ─► claim_table (and withdraw superseded chunks)
          ─► enter_bulk_mode (setup) and prepare_table (setup), side by side
          ─► load x N (mapped, a batch of chunks each) ─► finalize_table (and CHECKPOINT)
          ─► report, restore_table (teardown) and exit_bulk_mode (teardown), side by side

On RDS / Aurora (``rds_instance`` or ``rds_cluster``) bulk mode may reboot the instance (with
this run's ``reboot_policy="allowed"``, or another holder's, or when the last holder leaves a
swapped parameter group), so there ``prepare_table`` waits for ``enter_bulk_mode`` and
``exit_bulk_mode`` for ``restore_table``, as a reboot must not break their DDL.

Steps that need no task of their own run inside their neighbour (each Airflow task costs seconds
to start): ``claim_table`` also does ``WithdrawSupersededChunksOperator``'s work and
``finalize_table`` ends with ``CheckpointOperator``'s ``CHECKPOINT``; those operators stay for
DAGs that wire the stages themselves.

Every task is idempotent, so a retry, a cleared task or a re-run of the same DAG run picks up
where the last attempt stopped: staging finds its manifest, the chunk ledger skips committed
chunks, table preparation finds its saved state, and bulk mode re-claims its own lease. When the
input was corrected after a failed attempt, staging writes a new manifest and ``claim_table``
first takes the failed attempt's committed rows back out, so no row is loaded twice.
The teardowns run whatever failed in between, so the table gets its indexes back and the server
leaves bulk mode.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import Asset, TaskGroup, conf
from airflow.sdk.definitions.taskgroup import TaskGroup as _TaskGroup

from airflow_bulkload.bulk_mode.target import BulkModeTarget
from airflow_bulkload.modes import APPEND
from airflow_bulkload.operators import (
    ClaimTableOperator,
    EnterBulkModeOperator,
    ExitBulkModeOperator,
    FinalizeTableOperator,
    LoadChunkOperator,
    LoadReportOperator,
    PreflightCheckOperator,
    PrepareTableOperator,
    RestoreTableOperator,
)
from airflow_bulkload.operators.bulk_mode import RenewBulkModeLease
from airflow_bulkload.operators.report import record_end, record_start
from airflow_bulkload.operators.stage_groups import DEFAULT_GROUP_SIZE
from airflow_bulkload.pipeline_args import (
    AUTO,
    CHUNK_MAP_INDEX,
    check_finalize_extra,
    check_pipeline_arguments,
    mode_param,
    reload_param,
    then,
    with_extra,
)
from airflow_bulkload.pipeline_staging import add_staging
from airflow_bulkload.staging.options import PRESORTED
from airflow_bulkload.task_docs import TASK_DOCS, describe_tasks

__all__ = ["bulk_load_table", "default_group_id", "mode_param", "reload_param"]


def default_group_id(table: str) -> str:
    """``load_<table>`` with every character Airflow does not allow in ids replaced."""
    return "load_" + re.sub(r"[^A-Za-z0-9_-]", "_", table).strip("_")


def bulk_load_table(
    group_id: str | None = None,
    *,
    table: str,
    conn_id: str,
    source: str | list[str],
    staging: str,
    aws_conn_id: str | None = "aws_default",
    file_format: dict[str, Any] | None = None,
    columns: list[str] | None = None,
    method: str = "client",
    rds_instance: str | None = None,
    rds_cluster: str | None = None,
    bulk_mode: str | dict[str, Any] = AUTO,
    drop_indexes: bool | str = AUTO,
    drop_primary_key: bool | str = AUTO,
    sort_by_primary_key: bool | str = AUTO,
    chunk_size: str | int = "256MB",
    load_batch_size: str | int | None = "2GB",
    parallelism: int | str = AUTO,
    vcpus: int | None = None,
    fail_on: str | None = "error",
    load_retries: int = 2,
    load_retry_delay: timedelta = timedelta(seconds=30),
    table_claim_timeout: timedelta = timedelta(hours=2),
    outlets: Sequence[Asset] | None = None,
    reboot_policy: str = "never",
    reload: bool | str = False,
    teardown_retries: int = 5,
    teardown_retry_delay: timedelta = timedelta(seconds=15),
    restore_timeout: timedelta | None = timedelta(hours=6),
    exit_bulk_mode_timeout: timedelta | None = timedelta(hours=1),
    direct: bool | str = "auto",
    quoted_newlines: bool = True,
    stage_kwargs: dict[str, Any] | None = None,
    load_kwargs: dict[str, Any] | None = None,
    finalize_kwargs: dict[str, Any] | None = None,
    deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
    stage_group_size: str | int | None = DEFAULT_GROUP_SIZE,
    wait_for_input: timedelta | None = None,
    dry_run: bool = False,
    mode: str = APPEND,
    upsert_keys: list[str] | str | None = None,
) -> TaskGroup:
    """Build the task group that bulk loads ``source`` into ``table`` (see the module docstring).

    :param group_id: the group's id; default ``load_<table>``.
    :param table: target table: ``schema.table`` on PostgreSQL, ``db.table`` or ``table`` on MySQL.
    :param conn_id: a ``postgres`` or ``mysql`` connection; the SQL dialect follows its type.
    :param source: input files: local path/glob on the worker, ``s3://bucket/key`` or a prefix
        ending in ``/`` (templated, e.g. ``s3://in/events/{{ ds }}/``).
    :param staging: S3 URI under which chunks and the manifest are staged (templated).
    :param aws_conn_id: AWS connection for S3 and RDS.
    :param file_format: the input's format: ``format`` (``csv``/``text``), ``delimiter``,
        ``header``, ``null``, ``quote``, ``escape``, ``encoding``.
    :param columns: the input's columns in file order, when it has no header and they differ from
        the table's.
    :param method: ``client`` (stream through the worker), ``rds_s3`` (RDS/Aurora PostgreSQL
        ``aws_s3``) or ``aurora_s3`` (Aurora MySQL ``LOAD DATA FROM S3``; staged uncompressed).
    :param rds_instance: the RDS DB instance behind ``conn_id``: bulk mode changes its parameter
        group, and pre-flight reads its class, storage and maintenance window.
    :param rds_cluster: the Aurora cluster behind ``conn_id``: pre-flight reads its writer, and
        bulk mode changes cluster-level settings in its DB cluster parameter group (give
        ``rds_instance``, the writer, too for instance-level ones such as the defaults).
    :param bulk_mode: ``"auto"`` (the engine's default bulk settings), ``"off"``, or a dict of
        settings overriding the defaults. Without ``rds_instance`` the server's own settings are
        changed (ALTER SYSTEM / SET GLOBAL), which needs a privileged user.
    :param drop_indexes: ``"auto"`` (pre-flight decides from incoming vs existing size), or
        ``True``/``False``: an explicit value is what runs, whatever pre-flight advises (it may
        warn).
    :param drop_primary_key: ``"auto"`` drops the primary key and unique indexes (with the other
        indexes) only when the table is empty: on a table holding rows they stay, so a second
        copy of a row fails its chunk instead of committing. ``True`` drops them anyway (restore
        empties a formerly empty table whose load broke them); ``False`` keeps them.
    :param sort_by_primary_key: stage the input sorted by the table's primary key (tables without
        one are staged unsorted). ``"auto"`` (default): on MySQL only, where InnoDB's clustered
        key makes key order pay; a PostgreSQL heap gains nothing worth the sort. ``"presorted"``:
        the input is already in primary-key order (each file, and the files in the order
        listed, as an export or Spark writes it): nothing sorts it, MySQL loads it as sorted,
        and a PostgreSQL input can still load as stored.
    :param chunk_size: target uncompressed chunk size, e.g. ``"256MB"``.
    :param load_batch_size: the chunks are dealt into one ``load`` task per load session, each
        loading its batch one chunk after another (each chunk its own transaction and ledger
        entry), and into more tasks where a session's batch would pass this size (uncompressed,
        estimated), so no task's time follows the whole input. Fewer task launches: see
        docs/performance.md. ``None``: one ``load`` task per chunk.
    :param parallelism: how many chunks load at once: ``"auto"`` (pre-flight's recommendation for
        the instance's vCPUs, enforced by load slots on the database server) or an int (what
        runs, whatever pre-flight advises; also Airflow's ``max_active_tis_per_dagrun`` on the
        load task).
    :param vcpus: the server's vCPUs, for a self-managed server (RDS classes are known).
    :param fail_on: pre-flight severities that fail the run (``"error"``, ``"warn"``, ``None``).
    :param load_retries: retries of each chunk load (safe: the ledger makes them exactly-once),
        and of each ``stage_group`` task (a group is staged again from scratch).
        Bad data fails a chunk at once, without retries; retries are for lost connections.
    :param load_retry_delay: wait before a chunk load's retry.
    :param table_claim_timeout: how long ``claim_table`` waits while another load (a backfill
        beside the nightly run, say) holds the table, before failing with the holder's name.
    :param outlets: Assets the load updates (on the report task, which runs when it succeeded).
    :param reboot_policy: RDS bulk mode: ``"never"`` (default) or ``"allowed"``.
    :param reload: replace what this DAG loaded for the run's date: every chunk it committed for
        the date (from this input or an earlier one) is taken back out, by key, and the input
        loads again, exactly once. Templated, so a DAG can expose it as a Param for "Trigger
        DAG w/ config" and backfills (``reload="{{ params.reload }}"``). Without it, a second,
        different input for a date whose load completed is refused; a failed load's chunks are
        taken back out when its input is corrected.
    :param teardown_retries: retries of ``restore_table`` and ``exit_bulk_mode``, with
        exponential backoff from ``teardown_retry_delay``: a lost connection must not leave the
        table without its indexes or the server in bulk mode until someone clears the task (both
        are idempotent: a retry finishes what an attempt started).
    :param teardown_retry_delay: the first wait before a teardown's retry.
    :param restore_timeout: ``execution_timeout`` of ``restore_table`` (index rebuilds of a big
        table take hours: size it for yours); ``None`` for none.
    :param exit_bulk_mode_timeout: ``execution_timeout`` of ``exit_bulk_mode``.
    :param direct: load S3 input as stored, with no staged copy, where nothing needs
        rewriting (PostgreSQL, ``client`` method, CSV, no sort, no ``max_errors``); see
        ``StageToS3Operator``. ``"auto"`` (default) does so wherever it can; ``False`` always
        stages: COPY reads some malformed CSV differently from staging (such a load fails naming
        the line, and ``direct=False`` normalises and loads it).
    :param quoted_newlines: with ``direct``: quoted values may hold line ends, so objects load
        whole (default); ``False`` declares they never do and lets large objects load in ranges.
    :param stage_kwargs: more operator arguments for the ``stage`` task, e.g. ``{"queue":
        "staging", "executor_config": {...}}`` to route it to workers with the disk (see
        docs/scaling.md); they win over the pipeline's own, except the task's identity and what
        ties it to this load (``load_id``, ``mode``, ``upsert_keys``, ``manifest``,
        ``trigger_rule``).
    :param load_kwargs: the same for the mapped ``load`` tasks, e.g. ``{"pool": "db1"}``.
    :param finalize_kwargs: the same for ``finalize_table``, e.g. ``{"maintenance_work_mem":
        "256MB"}`` (per index build; see docs/performance.md) or ``{"parallelism": 1}`` to
        override the pre-flight plan's index-build sessions.
    :param stage_group_size: an input that needs staging and is larger than this
        (uncompressed, estimated; default ``"4GB"``) is staged by one mapped ``stage_group``
        task per group of files of at most this size, and ``preflight`` first writes the
        input's manifest from the groups' (a ``collect_staging`` task does, where the loads map
        over chunks: ``load_batch_size=None`` or a dry run), so no task's temp disk or time
        follows the whole input (see ``PlanStagingOperator``; each group is sorted on its own,
        unless the input is declared ``"presorted"``). A smaller input is staged by the
        ``stage`` task itself (as is input loaded as stored), and ``stage_group`` is skipped
        without starting (one scheduler pass, no task launch). ``None``: one ``stage`` task
        stages the whole input, however large, in one key order, on one worker's disk.
    :param deferrable: the long waits (the table claim held by another load, a free load slot,
        an RDS parameter change) run in the triggerer and hold no worker slot; needs a running
        ``airflow triggerer``. Default: ``[operators] default_deferrable``.
    :param wait_for_input: wait up to this long for the S3 input to appear (any object under a
        prefix, one matching a glob, or the object: what staging would read), in a
        ``wait_for_input`` sensor before staging (rescheduled, holding no slot between checks,
        at most a minute apart); the run fails when it does not. ``None`` (default): no wait, and an
        empty input loads 0 rows (the report says so).
    :param dry_run: change nothing: stage and pre-flight as usual, then each chunk is read by
        the engine into a temporary copy of the table and thrown away (the ``load`` tasks'
        ``validate_only``), and the report says what would load. No claim, bulk mode, table
        preparation or ledger; with the ``client`` method whatever ``method`` says.
    :param mode: ``append`` (default: add the rows), ``replace`` (the input becomes the table:
        loaded into a work table with the floor's fast path, then swapped in at once, so readers
        see the old rows or the new ones and a failed run leaves the old) or ``upsert`` (new
        rows added, rows with a key already there replaced, merged in batches from a work table).
        Templated, e.g. ``"{{ params.mode }}"``; see :mod:`airflow_bulkload.modes`.
    :param upsert_keys: with ``upsert``: the columns of the unique key to merge on (default: the
        primary key); a list, or comma-separated text from a template.
    """
    check_pipeline_arguments(
        method=method,
        bulk_mode=bulk_mode,
        parallelism=parallelism,
        drop_indexes=drop_indexes,
        drop_primary_key=drop_primary_key,
        reboot_policy=reboot_policy,
        mode=mode,
        upsert_keys=upsert_keys,
        load_batch_size=load_batch_size,
        chunk_size=chunk_size,
        stage_group_size=stage_group_size,
    )
    timing: dict[str, Any] = {"pre_execute": record_start, "post_execute": record_end}
    bulk_target = BulkModeTarget(
        db_instance_identifier=rds_instance,
        db_cluster_identifier=rds_cluster,
        conn_id=None if rds_instance or rds_cluster else conn_id,
        aws_conn_id=aws_conn_id,
    )
    load_timing = timing
    if bulk_mode != "off":
        # every chunk load renews the run's bulk-mode lease, so a long load never outlives it
        renew = RenewBulkModeLease(table=table, target=bulk_target)
        load_timing = timing | {"pre_execute": then(renew, record_start)}
    with _TaskGroup(group_id or default_group_id(table), tooltip=f"Bulk load of {table}") as group:
        stage_arguments = with_extra(
            {
                "file_format": file_format,
                "columns": columns,
                "sort_by_primary_key": sort_by_primary_key,
                "conn_id": conn_id,
                "aws_conn_id": aws_conn_id,
                "chunk_size": chunk_size,
                "load_method": method,
                "direct": direct,
                "quoted_newlines": quoted_newlines,
                **timing,
            },
            stage_kwargs,
            "stage_kwargs",
        )
        front = add_staging(
            source=source,
            staging=staging,
            table=table,
            aws_conn_id=aws_conn_id,
            stage_arguments=stage_arguments,
            stage_kwargs=stage_kwargs,
            stage_group_size=stage_group_size,
            wait_for_input=wait_for_input,
            retries=load_retries,
            retry_delay=load_retry_delay,
            timing=timing,
            # pre-flight deals the load batches from the manifest; without batches (or in a
            # dry run) the load tasks map over the staging front's chunk list
            chunks_from_manifest=load_batch_size is not None and not dry_run,
        )
        stage, manifest_uri, staging_tasks = front.stage, front.manifest_uri, front.tasks
        # what every task after staging is given: the table, its connections, the manifest
        staged: dict[str, Any] = {
            "table": table,
            "conn_id": conn_id,
            "aws_conn_id": aws_conn_id,
            "manifest": manifest_uri,
        }
        moded: dict[str, Any] = {"mode": mode, "upsert_keys": upsert_keys}
        preflight = PreflightCheckOperator(
            task_id="preflight",
            **staged,
            db_instance_identifier=rds_instance,
            db_cluster_identifier=rds_cluster,
            vcpus=vcpus,
            method=method,
            parallelism=parallelism,
            drop_indexes=drop_indexes,
            # declared in key order: nothing sorts, and the manifest tells pre-flight the order
            sort=False if sort_by_primary_key == PRESORTED else sort_by_primary_key,
            bulk_mode=bulk_mode != "off",
            fail_on=fail_on,
            load_batch_size=None if dry_run else load_batch_size,
            staging_groups=front.groups,  # type: ignore[arg-type]  # an XComArg, or None
            trigger_rule=front.next_trigger_rule,
            **moded,
            **timing,
        )
        front.last >> preflight
        if dry_run:  # each chunk through the engine's parser into a scratch copy; nothing kept
            trial = LoadChunkOperator.partial(
                task_id="load",
                table=table,
                conn_id=conn_id,
                **with_extra(
                    {"aws_conn_id": aws_conn_id, "validate_only": True, **timing}
                    | {"map_index_template": CHUNK_MAP_INDEX, "doc_md": TASK_DOCS["load"]},
                    load_kwargs,
                    "load_kwargs",
                ),
            ).expand(chunk=front.chunk_list)
            stage >> preflight >> trial
            trial >> LoadReportOperator(
                task_id="report",
                load_task_id=trial.task_id,
                stage_task_ids={"stage": stage.task_id, **staging_tasks, "load": trial.task_id},
                validate_only=True,
                trigger_rule="none_failed",
                **staged,
            )
            describe_tasks(group)
            return group
        # claim first: a load waiting for the table must not hold the server in bulk mode; then,
        # in the same task, take back what a superseded input of this load committed
        claim = ClaimTableOperator(
            task_id="claim_table",
            claim_timeout=table_claim_timeout.total_seconds(),
            deferrable=deferrable,
            reload=reload,
            mode=mode,
            **staged,
            **timing,
        )
        stage >> preflight >> claim

        prepare = PrepareTableOperator(
            task_id="prepare_table",
            # an explicit argument wins over pre-flight's advice
            drop_indexes=drop_indexes
            if isinstance(drop_indexes, bool)
            else preflight.planned("drop_indexes"),  # type: ignore[arg-type]  # resolves to a bool
            drop_primary_key=drop_primary_key,
            claim_timeout=table_claim_timeout.total_seconds(),
            **moded,
            **staged,
            **timing,
        )
        load = LoadChunkOperator.partial(
            task_id="load",
            table=table,
            conn_id=conn_id,
            **with_extra(
                {
                    "aws_conn_id": aws_conn_id,
                    "mode": mode,
                    "method": method,
                    "max_concurrent_loads": parallelism
                    if isinstance(parallelism, int)
                    else preflight.planned("parallelism"),  # resolves to an int
                    "deferrable": deferrable,
                    "map_index_template": CHUNK_MAP_INDEX,
                    "doc_md": TASK_DOCS["load"],
                    "retries": load_retries,
                    "retry_delay": load_retry_delay,
                    "max_active_tis_per_dagrun": parallelism
                    if isinstance(parallelism, int)
                    else None,
                    **load_timing,
                },
                load_kwargs,
                "load_kwargs",
            ),
        ).expand(chunk=front.chunk_list if load_batch_size is None else preflight.load_batches())
        # a literal setting is checked now, not after the load (a template only renders then)
        check_finalize_extra(finalize_kwargs)
        finalize = FinalizeTableOperator(
            task_id="finalize_table",
            **with_extra(
                {
                    "parallelism": preflight.planned("index_build_parallelism"),  # an int
                    "checkpoint": True,
                    **moded,
                    **staged,
                    **timing,
                },
                finalize_kwargs,
                "finalize_kwargs",
            ),
        )
        teardown: dict[str, Any] = {
            "retries": teardown_retries,
            "retry_delay": teardown_retry_delay,
            "retry_exponential_backoff": True,
            "max_retry_delay": timedelta(minutes=10),
        }
        restore = RestoreTableOperator(
            task_id="restore_table",
            table=table,
            conn_id=conn_id,
            mode=mode,
            execution_timeout=restore_timeout,
            **teardown,
        )

        enter: EnterBulkModeOperator | None = None
        exit_: ExitBulkModeOperator | None = None
        if bulk_mode != "off":
            bulk: dict[str, Any] = {
                "table": table,
                "target": bulk_target,
                "settings": bulk_mode if isinstance(bulk_mode, dict) else None,
                "reboot_policy": reboot_policy,
                "deferrable": deferrable,
            }
            enter = EnterBulkModeOperator(task_id="enter_bulk_mode", **bulk, **timing)
            exit_ = ExitBulkModeOperator(
                task_id="exit_bulk_mode",
                execution_timeout=exit_bulk_mode_timeout,
                **bulk,
                **teardown,
            )

        # report name -> task, in pipeline order
        stages = {
            "stage": stage.task_id,
            **staging_tasks,
            "preflight": preflight.task_id,
            "claim_table": claim.task_id,
            **({"enter_bulk_mode": enter.task_id} if enter else {}),
            "prepare_table": prepare.task_id,
            "load": load.task_id,
            "finalize_table": finalize.task_id,
        }
        report = LoadReportOperator(
            task_id="report",
            load_task_id=load.task_id,
            stage_task_ids=stages,
            mode=mode,
            **staged,
            outlets=list(outlets or []),
            # an empty input maps no load task, which skips finalize: the report
            # still runs and says "0 rows, input empty"; after a failure it does not
            trigger_rule="none_failed",
        )
        # bulk mode and the table's preparation are independent of each other: side by side
        # after the claim, one task launch fewer on the way to the load. Not on RDS / Aurora:
        # a reboot under prepare's or restore's DDL would break it, and a reboot there follows
        # the instance's shared state (another holder's reboot policy or swap), not only ours.
        may_reboot = bulk_target.is_rds
        claim >> prepare
        if enter:
            claim >> enter
            if may_reboot:
                enter >> prepare
            enter >> load
        prepare >> load >> finalize >> report
        # Both teardowns run whatever failed, even a setup that failed half-way (prepare after
        # dropping some indexes, enter after changing some settings): the default teardown rule
        # would skip them when their setup failed.
        restore.as_teardown(setups=prepare)
        claim >> restore  # releases the claim also when enter_bulk_mode or prepare failed
        restore.trigger_rule = "all_done"  # type: ignore[assignment]
        finalize >> restore
        if enter and exit_:
            exit_.as_teardown(setups=enter)
            exit_.trigger_rule = "all_done"  # type: ignore[assignment]
            # the server leaves bulk mode once the load's work is done, beside restore_table
            # (which has nothing to build once finalize did); after it where a reboot could
            # break a rebuild restore_table still has to do
            finalize >> exit_
            if may_reboot:
                restore >> exit_
    describe_tasks(group)
    return group
