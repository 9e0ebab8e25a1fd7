"""Prepare a table for a bulk load and put it back: prepare / finalize / restore / checkpoint.

::

    prepare = PrepareTableOperator(task_id="prepare_table", table="public.events", conn_id="pg",
                                   manifest=stage.output["manifest_uri"])
    finalize = FinalizeTableOperator(task_id="finalize_table", table="public.events", conn_id="pg")
    restore = RestoreTableOperator(task_id="restore_table", table="public.events", conn_id="pg")
    prepare.as_setup() >> load >> finalize >> CheckpointOperator(task_id="checkpoint", conn_id="pg")
    finalize >> restore.as_teardown(setups=prepare)

(``FinalizeTableOperator(checkpoint=True)`` checkpoints in the finalize task instead.)

Prepare, finalize and restore of one pipeline must get the same ``table`` (and ``load_id`` when
given): the default load id is ``dag_id/table/logical date`` (the run id when there is none), the
key bulk-mode leases use, so a re-run of the same DAG run continues its own saved state.

The saved state lives in the target database (see :class:`~airflow_bulkload.hooks.table_state.
TableStateHook`), never only in XCom: a worker killed anywhere leaves enough behind for a re-run of
prepare, or finalize, or restore, to put the table back exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_bulkload.advice.plan import INDEX_BUILD_MEMORY
from airflow_bulkload.hooks.load_modes import LoadModesHook
from airflow_bulkload.hooks.table_state import TableStateHook
from airflow_bulkload.knobs import (
    check_bool,
    check_memory_setting,
    default_load_id,
    parse_flag,
    parse_optional_int,
    parse_parallelism,
)
from airflow_bulkload.modes import APPEND, parse_mode_arguments
from airflow_bulkload.operators.base import TableTaskOperator
from airflow_bulkload.operators.undone_by_teardown import refuse_if_run_on
from airflow_bulkload.operators.validation import validate_or_fail


class _TableOperator(TableTaskOperator):
    """Shared: the table, its connections and the load id."""

    ui_color = "#e8e0f5"

    def __init__(
        self,
        *,
        table: str,
        conn_id: str,
        load_id: str | None = None,
        aws_conn_id: str | None = "aws_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, conn_id=conn_id, aws_conn_id=aws_conn_id, **kwargs)
        self.load_id = load_id

    def resolved_load_id(self, context: Context) -> str:
        if self.load_id:
            return self.load_id
        when = context.get("logical_date") or context["run_id"]
        return default_load_id(context["dag"].dag_id, self.table, when)

    def hook(self) -> LoadModesHook:
        return LoadModesHook(conn_id=self.conn_id, aws_conn_id=self.aws_conn_id)


class _ModeTableOperator(_TableOperator):
    """Shared by prepare, finalize and restore: the load mode, and the key an upsert merges on."""

    template_fields: Sequence[str] = ("table", "conn_id", "load_id", "mode", "upsert_keys")

    def __init__(
        self,
        *,
        mode: str = APPEND,
        upsert_keys: list[str] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.mode = mode
        self.upsert_keys = upsert_keys

    def _check_mode(self) -> None:
        self.load_mode()

    def load_mode(self) -> tuple[str, list[str] | None]:
        """The rendered ``mode`` and ``upsert_keys``, checked (``ValueError``)."""
        return parse_mode_arguments(self.mode, self.upsert_keys)

    def _check_mode_input(self, manifest: str | None) -> None:
        """Refuse a bad mode, or a replace/upsert without the staged input (``ValueError``)."""
        mode, _ = self.load_mode()
        if mode != APPEND and not manifest:
            raise ValueError(f"mode={mode!r} needs the staged input's manifest")


PREPARE_OUTLIVES = "a failure would leave the table claimed and without its indexes"


class PrepareTableOperator(_ModeTableOperator):
    """Save the table's state durably, then strip it for a fast load.

    Saved **before** anything changes, in the state tables of the target database: every index
    (PostgreSQL ``pg_get_indexdef`` text: unique, partial, expression, covering, descending,
    collation, method, storage parameters; MySQL ``SHOW CREATE TABLE`` key lines: prefix lengths,
    invisible/fulltext keys), PK/UNIQUE constraint definitions, foreign keys declared on the table
    and those pointing to it, and the reloptions. Then (PostgreSQL) ``autovacuum_enabled = false``
    and the drops the decision calls for. A re-run for the same load id continues from the saved
    state and decision and never captures the stripped table again.

    The table is claimed for the load (a durable row, released by finalize/restore): a second load
    of the same table waits up to ``claim_timeout`` seconds, then fails naming the holder.
    Cleared to run again after its teardown (:class:`RestoreTableOperator`) has run in its DAG
    run ("only failed" after it failed), it fails without changing anything
    (:mod:`~airflow_bulkload.operators.undone_by_teardown`).

    Returns (XCom) ``{"load_id", "table", "resumed", "dropped", "kept", "decision"}``.

    :param table: ``schema.table`` (PostgreSQL) or ``db.table``/``table`` (MySQL).
    :param conn_id: a ``postgres`` or ``mysql`` connection.
    :param drop_indexes: ``True``/``False``/``"auto"`` (templated; strings in any case). Auto drops
        the secondary indexes when the table is (nearly) empty, or the incoming data is at least
        ``advice.plan.DROP_INDEXES_MIN_RATIO`` (50 %) of the table's size (data + indexes); with
        the input size unknown, a non-empty table keeps them.
    :param drop_primary_key: ``"auto"``: PostgreSQL drops the PK too when the secondary indexes go
        (or there are none) and the table is empty (checked exactly): unique keys are guards, and
        on a table holding rows they stay to reject a second copy of a row chunk by chunk. It is
        rebuilt as ``CREATE UNIQUE INDEX`` + ``ADD PRIMARY KEY USING INDEX``; if the load's own
        rows break it, restore empties the (formerly empty) table again. MySQL never drops it
        (InnoDB's clustered index); ``True`` is refused there.
    :param drop_unique_indexes: secondary UNIQUE indexes; ``"auto"``: as the primary key (on an
        empty table, or when ``drop_primary_key`` is ``True``), with ``drop_indexes``.
    :param drop_foreign_keys: ``"auto"``: PostgreSQL drops the foreign keys from and to the table
        when indexes are dropped; MySQL keeps them (the load runs with ``foreign_key_checks = 0``).
        An index a kept foreign key needs is kept.
    :param incoming_bytes: size of the data to load (templated), for ``"auto"``.
    :param manifest: ``s3://.../manifest.json`` of the staged input: its size is read for
        ``drop_indexes="auto"`` when ``incoming_bytes`` is not given (templated); a given
        ``drop_indexes`` reads nothing from S3.
    :param aws_conn_id: AWS connection to read the manifest.
    :param load_id: the key of the saved state; default ``dag_id/table/logical date``.
    :param claim_timeout: seconds to wait for another load's claim on the table (default 0: fail
        at once, naming the holder).
    :param mode: ``append`` (default), or ``replace``/``upsert`` (templated): the target stays as
        it is; a work table is created from its definition (``manifest`` required) and prepared
        (see :mod:`airflow_bulkload.modes`).
    :param upsert_keys: with ``upsert``: the unique key to merge on (default the primary key).
    """

    template_fields: Sequence[str] = (
        *_ModeTableOperator.template_fields,
        "drop_indexes",
        "drop_primary_key",
        "drop_foreign_keys",
        "drop_unique_indexes",
        "incoming_bytes",
        "manifest",
    )

    def __init__(
        self,
        *,
        table: str,
        conn_id: str,
        drop_indexes: bool | str = "auto",
        drop_primary_key: bool | str = "auto",
        drop_foreign_keys: bool | str = "auto",
        drop_unique_indexes: bool | str = "auto",
        incoming_bytes: int | str | None = None,
        manifest: str | None = None,
        aws_conn_id: str | None = "aws_default",
        load_id: str | None = None,
        claim_timeout: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            table=table, conn_id=conn_id, load_id=load_id, aws_conn_id=aws_conn_id, **kwargs
        )
        self.drop_indexes = drop_indexes
        self.drop_primary_key = drop_primary_key
        self.drop_foreign_keys = drop_foreign_keys
        self.drop_unique_indexes = drop_unique_indexes
        self.incoming_bytes = incoming_bytes
        self.manifest = manifest
        self.claim_timeout = claim_timeout

    def validate(self) -> None:
        """Refuse drop flags and sizes that do not parse (``ValueError``).

        A drop flag is ``True``/``False``/``"auto"`` (or that text, any case), ``incoming_bytes``
        an integer. Run by ``execute`` with the templated fields rendered.
        """
        self._flags()
        parse_optional_int(self.incoming_bytes, "incoming_bytes")
        self._check_mode_input(self.manifest)

    def _flags(self) -> dict[str, bool | None]:
        """The drop flags, parsed: ``None`` for ``"auto"``."""
        return {
            "drop_indexes": parse_flag(self.drop_indexes, "drop_indexes"),
            "drop_primary_key": parse_flag(self.drop_primary_key, "drop_primary_key"),
            "drop_foreign_keys": parse_flag(self.drop_foreign_keys, "drop_foreign_keys"),
            "drop_unique_indexes": parse_flag(self.drop_unique_indexes, "drop_unique_indexes"),
        }

    def execute(self, context: Context) -> dict[str, Any]:
        validate_or_fail(self.validate)
        refuse_if_run_on(self, context, PREPARE_OUTLIVES)
        mode, keys = self.load_mode()
        if mode != APPEND:  # the target stays as it is; a work table of its shape is prepared
            return self.hook().prepare_work_table(
                self.table,
                mode=mode,
                load_id=self.resolved_load_id(context),
                manifest=str(self.manifest),
                upsert_keys=keys,
                claim_timeout=self.claim_timeout,
            )
        flags = self._flags()
        incoming = parse_optional_int(self.incoming_bytes, "incoming_bytes")
        # only the index decision weighs the input's size (the primary key's follows the
        # table's emptiness): a given drop_indexes, as the pipeline's plan, reads no manifest
        if incoming is None and self.manifest and flags["drop_indexes"] is None:
            incoming = self._manifest_bytes(self.manifest)
        return self.hook().prepare(
            self.table,
            load_id=self.resolved_load_id(context),
            drop_indexes=flags["drop_indexes"],
            drop_primary_key=flags["drop_primary_key"],
            drop_foreign_keys=flags["drop_foreign_keys"],
            drop_unique_indexes=flags["drop_unique_indexes"],
            incoming_bytes=incoming,
            claim_timeout=self.claim_timeout,
        )

    def _manifest_bytes(self, uri: str) -> int:
        """The input's size from a staged manifest: uncompressed bytes when known."""
        from airflow_bulkload.advice.models import InputSummary
        from airflow_bulkload.s3io import s3_client
        from airflow_bulkload.staging.manifest import read_manifest

        manifest = read_manifest(s3_client(self.aws_conn_id), uri, required=True)
        summary = InputSummary.from_manifest(manifest)
        self.log.info("%s: %d bytes to load (%s)", uri, summary.data_bytes, self.table)
        return summary.data_bytes


class FinalizeTableOperator(_ModeTableOperator):
    """Rebuild what prepare dropped, verify, restore reloptions/autovacuum, ANALYZE, mark done.

    PostgreSQL builds each index in a session of its own, up to ``parallelism`` at once, with
    ``maintenance_work_mem`` set in those sessions; the PK and UNIQUE constraints are built as
    ``CREATE UNIQUE INDEX`` and attached with ``ADD CONSTRAINT ... USING INDEX``; foreign keys are
    re-added ``NOT VALID`` then validated. MySQL adds all keys in one ``ALTER TABLE`` (InnoDB reads
    and sorts the table once). Every saved definition is then compared with the catalog
    (normalised DDL) and the claim on the table released.

    A unique index that cannot be built because the loaded data has duplicates fails the task with
    a sample of the duplicate keys (:class:`~airflow_bulkload.exceptions.DuplicateKeyError`); the
    saved state is kept, so a retry after removing the duplicates completes it.

    Returns (XCom) ``{"load_id", "table", "status", "rebuilt", "seconds", ...}`` with the build
    seconds per index/constraint/foreign key.

    :param table: ``schema.table`` (PostgreSQL) or ``db.table``/``table`` (MySQL).
    :param conn_id: a ``postgres`` or ``mysql`` connection.
    :param parallelism: PostgreSQL index-build sessions; ``"auto"`` (default):
        ``advice.plan.DEFAULT_PARALLELISM`` (2), at most one per index; or a positive int (its
        text from a template too). The pipeline passes the pre-flight plan's
        ``index_build_parallelism``. ``maintenance_work_mem`` is per session.
    :param maintenance_work_mem: PostgreSQL memory per index build (ignored on MySQL); default
        ``advice.plan.INDEX_BUILD_MEMORY`` (64 MB), which built the indexes faster than 1 GB at
        10 M and 50 M rows on 2 cores with three builds at once (docs/performance.md).
    :param load_id: as given to :class:`PrepareTableOperator`.
    :param analyze: run ANALYZE (PostgreSQL) / ANALYZE TABLE (MySQL) at the end.
    :param manifest: the staged input's ``manifest.json`` URI (templated); with it, a duplicate
        key is also looked up in the input files and the error names the lines holding it.
    :param aws_conn_id: AWS connection to read the manifest and the input files.
    :param mode: ``append`` (default), or ``replace``/``upsert`` (templated): rebuild the work
        table's indexes, then swap it in (replace) or merge it by key, check every row and drop it
        (upsert); ``manifest`` required
        (see :mod:`airflow_bulkload.modes`).
    :param upsert_keys: as given to :class:`PrepareTableOperator`: the key the merge matches on.
    :param checkpoint: once the table is finalized, also run :class:`CheckpointOperator`'s
        ``CHECKPOINT`` (skipped with a warning without the privilege) in the same task, and
        return what it did under ``"checkpoint"`` (the pipeline does, saving a task launch).
    """

    template_fields: Sequence[str] = (
        *_ModeTableOperator.template_fields,
        "parallelism",
        "maintenance_work_mem",
        "manifest",
    )

    def __init__(
        self,
        *,
        table: str,
        conn_id: str,
        parallelism: int | str = "auto",
        maintenance_work_mem: str = INDEX_BUILD_MEMORY,
        load_id: str | None = None,
        analyze: bool = True,
        manifest: str | None = None,
        aws_conn_id: str | None = "aws_default",
        checkpoint: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            table=table, conn_id=conn_id, load_id=load_id, aws_conn_id=aws_conn_id, **kwargs
        )
        self.parallelism = parallelism
        self.maintenance_work_mem = maintenance_work_mem
        self.analyze = analyze
        self.manifest = manifest
        self.checkpoint = checkpoint

    def validate(self) -> None:
        """Refuse a ``parallelism`` other than ``"auto"`` or a positive integer (``ValueError``).

        Also a ``maintenance_work_mem`` that is not a memory setting, an ``analyze`` that is not a
        bool, and a replace/upsert without its manifest. Run by ``execute`` with the templated
        fields rendered.
        """
        parse_parallelism(self.parallelism, 1, 1)
        check_memory_setting(self.maintenance_work_mem, "maintenance_work_mem")
        check_bool(self.analyze, "analyze")
        check_bool(self.checkpoint, "checkpoint")
        self._check_mode_input(self.manifest)

    def execute(self, context: Context) -> dict[str, Any]:
        validate_or_fail(self.validate)
        mode, keys = self.load_mode()
        rebuild: dict[str, Any] = {
            "load_id": self.resolved_load_id(context),
            "parallelism": self.parallelism,
            "maintenance_work_mem": self.maintenance_work_mem,
            "analyze": self.analyze,
        }
        hook = self.hook()
        if mode != APPEND:  # rebuild the work table's indexes, then swap it in or merge it
            done = hook.finalize_work_table(
                self.table, mode=mode, manifest=str(self.manifest), upsert_keys=keys, **rebuild
            )
        else:
            done = hook.finalize(self.table, manifest=self.manifest or None, **rebuild)
        if self.checkpoint:
            done["checkpoint"] = hook.checkpoint(skip_without_privilege=True)
        return done


class RestoreTableOperator(_ModeTableOperator):
    """The teardown twin of :class:`PrepareTableOperator`: put the table back as saved.

    When the table's state is saved and not done (a load failed, finalize never ran or failed), put
    it back exactly as saved (indexes, constraints, foreign keys, reloptions) and release the claim;
    when nothing was changed or finalize completed, do nothing. Idempotent: safe to run twice.

    Rows loaded in between stay: committed chunks are kept, a failed chunk left nothing.

    :param table: ``schema.table`` (PostgreSQL) or ``db.table``/``table`` (MySQL).
    :param conn_id: a ``postgres`` or ``mysql`` connection.
    :param load_id: as given to :class:`PrepareTableOperator`.
    :param mode: ``append`` (default), or ``replace``/``upsert`` (templated): the target was
        never changed: drop the work table unless it was published
        (see :mod:`airflow_bulkload.modes`).
    :param upsert_keys: as given to :class:`PrepareTableOperator` (checked with ``mode``; the
        work table's name does not depend on it).
    """

    template_fields: Sequence[str] = _ModeTableOperator.template_fields
    ui_color = "#e3f1d4"

    def execute(self, context: Context) -> dict[str, Any]:
        validate_or_fail(self._check_mode)
        mode, _ = self.load_mode()
        if mode != APPEND:  # the target was never stripped: drop an unpublished work table
            return self.hook().restore_work_table(
                self.table, mode=mode, load_id=self.resolved_load_id(context)
            )
        return self.hook().restore(self.table, load_id=self.resolved_load_id(context))


class CheckpointOperator(BaseOperator):
    """PostgreSQL ``CHECKPOINT`` after the load (before bulk mode ends).

    So the next crash recovery does not replay the load's WAL.

    Needs a superuser, or on PostgreSQL 15+ a member of ``pg_checkpoint``
    (``GRANT pg_checkpoint TO loader``); on RDS the master user (``rds_superuser``) may run it.
    Without the privilege the checkpoint is skipped with a warning (the data is committed; the
    checkpoint only shortens recovery after a crash soon after the load), and pre-flight says so
    beforehand; ``skip_without_privilege=False`` fails instead
    (:class:`~airflow_bulkload.exceptions.InsufficientPrivilegeError`).

    On MySQL a logged no-op: InnoDB checkpoints continuously and has no statement for a full one.

    :param conn_id: a ``postgres`` or ``mysql`` connection.
    :param skip_without_privilege: skip with a warning when the user may not checkpoint.
    """

    template_fields: Sequence[str] = ("conn_id",)
    ui_color = "#e8e0f5"

    def __init__(self, *, conn_id: str, skip_without_privilege: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id
        self.skip_without_privilege = skip_without_privilege

    def execute(self, context: Context) -> str:
        return TableStateHook(conn_id=self.conn_id).checkpoint(
            skip_without_privilege=self.skip_without_privilege
        )


def __getattr__(name: str) -> Any:
    # ClaimTableOperator moved to operators/claim.py; DAGs importing it from here still work
    if name == "ClaimTableOperator":
        from airflow_bulkload.operators.claim import ClaimTableOperator

        return ClaimTableOperator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
