"""PreflightCheckOperator: before loading, what will make the load slow or risky, and why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Context, XComArg
from airflow.sdk.definitions.xcom_arg import PlainXComArg

from airflow_bulkload.advice import (
    InputSummary,
    LoadOptions,
    PreflightInputs,
    PreflightReport,
    Severity,
    evaluate,
)
from airflow_bulkload.advice.models import AUTO, FailOn, LoadPlan, failing_severities
from airflow_bulkload.exceptions import PreflightFailedError
from airflow_bulkload.hooks.load_modes import LoadModesHook
from airflow_bulkload.modes import parse_mode, parse_mode_arguments
from airflow_bulkload.operators.base import TableTaskOperator
from airflow_bulkload.operators.stage import airflow_max_map_length
from airflow_bulkload.operators.validation import check_method, validate_or_fail
from airflow_bulkload.s3io import s3_client
from airflow_bulkload.staging.groups import collected_manifest
from airflow_bulkload.staging.load_batches import deal_chunks
from airflow_bulkload.staging.manifest import Manifest
from airflow_bulkload.staging.planning import parse_size_argument

#: the plan's knobs that the task also pushes one by one, each under :func:`plan_xcom_key`
PLAN_KNOBS = ("parallelism", "drop_indexes", "sort", "chunk_size", "index_build_parallelism")


#: a read manifest, a manifest dict, or the staging task's list of chunk dicts
ManifestInput = Manifest | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None


def plan_xcom_key(knob: str) -> str:
    """The XCom key under which pre-flight pushes one knob of its plan: ``plan_<knob>``."""
    if knob not in PLAN_KNOBS:
        raise ValueError(f"the plan has no knob {knob!r}; it has {', '.join(PLAN_KNOBS)}")
    return f"plan_{knob}"


class PreflightCheckOperator(TableTaskOperator):
    """Report what will make the load slow or risky, with a recommended plan.

    Read the target table (and, when given, the staged input and the RDS instance); each finding
    comes with the measured effect it rests on, and the plan says parallelism, drop indexes, sort
    and chunk size.

    The report (``findings`` + ``plan``, see :class:`~airflow_bulkload.advice.PreflightReport`) is
    returned to XCom (with ``load_batch_size``: pushed under the key ``report``, and the load
    batches are returned) and logged as a table. Each knob of ``plan`` is also pushed under its own XCom
    key, ``plan_<knob>`` (:data:`PLAN_KNOBS`), so another task takes it as a native value:
    ``preflight.planned("parallelism")``. The pipeline uses them for every knob left on
    ``"auto"``. The task fails when a finding has a severity listed by ``fail_on``; the report is
    pushed under the XCom key ``report`` first, so it can be read even then.

    :param table: the target table, ``schema.table`` (PostgreSQL) or ``db.table``/``table`` (MySQL).
    :param conn_id: a ``postgres`` or ``mysql`` connection; the dialect follows its type.
    :param aws_conn_id: AWS connection for the manifest in S3 and the RDS API.
    :param manifest: the staged input: an ``s3://.../manifest.json`` URI, a manifest dict, or the
        staging task's list of chunk dicts. Optional.
    :param staging_groups: the groups :class:`~airflow_bulkload.operators.stage_groups.
        PlanStagingOperator` returned (templated): when there are any, this task first writes the
        input's manifest (``manifest``, the plan task's ``manifest_uri``) from the groups' own, as
        ``CollectStagingOperator`` does, so the pipeline needs no task for it. Empty or ``None``:
        the manifest is read as it is.
    :param input_bytes: an estimate of the input size (stored bytes) when nothing is staged yet.
    :param input_rows: an estimate of the input's row count, with ``input_bytes``.
    :param sorted_by: the columns the input is known to be sorted by (with ``input_bytes``).
    :param db_instance_identifier: the RDS instance behind ``conn_id``, to judge class, storage,
        maintenance window and parameter groups.
    :param db_cluster_identifier: the Aurora cluster behind ``conn_id`` (its writer is read).
    :param region_name: the AWS region of the instance; default: the AWS connection's.
    :param vcpus: the server's vCPU count, for a self-managed server (overrides the instance class).
    :param method: the load method the load will use: ``client``, ``rds_s3`` or ``aurora_s3``.
    :param parallelism: the load's parallelism, or ``"auto"`` for the recommendation.
    :param drop_indexes: whether the load drops secondary indexes, or ``"auto"``.
    :param sort: whether staging sorts by the primary key, or ``"auto"``.
    :param chunk_size: the staging chunk size in bytes, or ``"auto"``.
    :param load_start: when the load starts (datetime or ISO 8601 text, UTC if naive); default:
        when this task runs.
    :param expected_duration: how long the load is expected to take (``timedelta`` or minutes),
        to check against the maintenance window.
    :param bulk_mode: whether the load will put the instance in bulk mode (makes a default
        parameter group a warning rather than information).
    :param fail_on: the severities that fail the task: ``"error"`` (default), ``"warn"`` (warn and
        error), ``"info"`` (any finding), a list of severities, or ``None`` (never fail).
    :param mode: the load mode (``append``/``replace``/``upsert``, templated): a table it cannot
        load as promised fails pre-flight (e.g. ``replace`` of a table views read), and the
        ``load_mode`` rule says which mode fits the input.
    :param upsert_keys: with ``mode="upsert"``: the unique key to merge on (default the primary
        key).
    :param ignore_rules: rule ids whose findings are dropped (e.g. ``["triggers"]``).
    :param load_batch_size: deal the manifest's chunks into load batches, one per load session
        of the plan and more when a session's share would pass this size (uncompressed, e.g.
        ``"2GB"``; see :mod:`~airflow_bulkload.staging.load_batches`), and return them instead of
        the report (which is then under the XCom key ``report``), for a ``LoadChunkOperator``
        mapped over them: ``expand(chunk=preflight.load_batches())`` (Airflow maps over return
        values only). ``None`` (default): the report is returned.
    """

    template_fields: Sequence[str] = (
        "table",
        "conn_id",
        "manifest",
        "staging_groups",
        "input_bytes",
        "input_rows",
        "sorted_by",
        "db_instance_identifier",
        "db_cluster_identifier",
        "vcpus",
        "method",
        "parallelism",
        "drop_indexes",
        "sort",
        "chunk_size",
        "load_start",
        "fail_on",
        "ignore_rules",
        "mode",
        "upsert_keys",
        "load_batch_size",
    )
    ui_color = "#fff4d6"

    def __init__(
        self,
        *,
        table: str,
        conn_id: str,
        aws_conn_id: str | None = "aws_default",
        manifest: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        staging_groups: Sequence[dict[str, Any]] | None = None,
        input_bytes: int | str | None = None,
        input_rows: int | str | None = None,
        sorted_by: Sequence[str] | None = None,
        db_instance_identifier: str | None = None,
        db_cluster_identifier: str | None = None,
        region_name: str | None = None,
        vcpus: int | str | None = None,
        method: str = "client",
        parallelism: int | str = AUTO,
        drop_indexes: bool | str = AUTO,
        sort: bool | str = AUTO,
        chunk_size: int | str = AUTO,
        load_start: datetime | str | None = None,
        expected_duration: timedelta | int = timedelta(hours=1),
        bulk_mode: bool = True,
        fail_on: FailOn = "error",
        ignore_rules: Sequence[str] = (),
        mode: str = "append",
        upsert_keys: list[str] | str | None = None,
        load_batch_size: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, conn_id=conn_id, aws_conn_id=aws_conn_id, **kwargs)
        self.mode = mode
        self.upsert_keys = upsert_keys
        self.load_batch_size = load_batch_size
        self.manifest = manifest
        self.staging_groups = staging_groups
        self.input_bytes = input_bytes
        self.input_rows = input_rows
        self.sorted_by = sorted_by
        self.db_instance_identifier = db_instance_identifier
        self.db_cluster_identifier = db_cluster_identifier
        self.region_name = region_name
        self.vcpus = vcpus
        self.method = method
        self.parallelism = parallelism
        self.drop_indexes = drop_indexes
        self.sort = sort
        self.chunk_size = chunk_size
        self.load_start = load_start
        self.expected_duration = expected_duration
        self.bulk_mode = bulk_mode
        self.fail_on = fail_on
        self.ignore_rules = ignore_rules

    def planned(self, knob: str) -> XComArg:
        """The plan's value of ``knob`` as this task pushes it, for another task's argument.

        Resolves to the native value (an ``int`` or a ``bool``) when that task runs, e.g.
        ``FinalizeTableOperator(..., parallelism=preflight.planned("index_build_parallelism"))``.
        """
        return PlainXComArg(operator=self, key=plan_xcom_key(knob))

    def load_batches(self) -> XComArg:
        """The manifest's chunks dealt into load batches (needs ``load_batch_size``).

        For ``LoadChunkOperator.partial(...).expand(chunk=preflight.load_batches())``.
        """
        if self.load_batch_size is None:
            raise ValueError(f"{self.task_id}: load_batches() needs load_batch_size")
        return self.output

    def validate(self) -> None:
        """Refuse an unknown method or severity and knobs that do not parse (``ValueError``).

        Run by ``execute`` before anything is read, with the templated fields rendered.
        """
        check_method(self.method)
        failing_severities(self.fail_on)
        self._options()
        parse_mode_arguments(self.mode, self.upsert_keys)
        self._load_batch_bytes()

    def _load_batch_bytes(self) -> int | None:
        """The batch bound in bytes; ``None`` when none is given or it renders empty."""
        if self.load_batch_size is None or self.load_batch_size == "":
            return None
        return parse_size_argument(self.load_batch_size, "load_batch_size")

    def execute(self, context: Context) -> dict[str, Any] | list[list[dict[str, Any]]]:
        validate_or_fail(self.validate)
        # a mode the table cannot take as promised is refused before anything changes
        LoadModesHook(self.conn_id, self.aws_conn_id).check_mode(
            self.table, *parse_mode_arguments(self.mode, self.upsert_keys)
        )
        hook = self.bulk_load_hook()
        table_info = hook.describe_table(self.table)
        server = hook.server_facts()
        self.log.info(
            "%s: %d columns, primary key %s, %d secondary index(es), %d trigger(s), ~%d rows, "
            "%.1f MB; server %s %s",
            table_info.table,
            len(table_info.columns),
            table_info.primary_key or "none",
            len(table_info.secondary_indexes),
            len(table_info.triggers),
            table_info.estimated_rows,
            table_info.size_bytes / 1e6,
            server.engine,
            server.version,
        )
        instance = None
        if self.db_instance_identifier or self.db_cluster_identifier:
            from airflow_bulkload.advice.instance import read_instance

            instance = read_instance(
                db_instance_identifier=self.db_instance_identifier or None,
                db_cluster_identifier=self.db_cluster_identifier or None,
                aws_conn_id=self.aws_conn_id,
                region_name=self.region_name,
            )
            self.log.info(
                "instance %s: %s (%s vCPUs), %s %s GB, Multi-AZ %s, parameter groups %s",
                instance.identifier,
                instance.instance_class,
                instance.vcpus if instance.vcpus is not None else "unknown",
                instance.storage_type,
                instance.allocated_gb,
                instance.multi_az,
                ", ".join(instance.parameter_groups) or "-",
            )
        manifest = self._read_manifest()
        inputs = PreflightInputs(
            engine=hook.dialect.name,
            table=table_info,
            input=self._input_summary(manifest),
            instance=instance,
            server=server,
            options=self._options(),
        )
        report = evaluate(inputs, ignore_rules=_as_list(self.ignore_rules))
        self.log.info("\n%s", report.format_table())
        result = report.to_dict()
        failures = report.failures(self.fail_on)
        if failures or self.load_batch_size is not None:
            context["ti"].xcom_push(key="report", value=result)
        if failures:
            raise PreflightFailedError(_failure_message(report, failures, self.fail_on))
        for knob in PLAN_KNOBS:
            context["ti"].xcom_push(key=plan_xcom_key(knob), value=result["plan"][knob])
        if self.load_batch_size is not None:
            return self._load_batches(
                manifest, result["plan"]["parallelism"], self._load_batch_bytes()
            )
        return result

    def _load_batches(
        self, manifest: ManifestInput, sessions: int, batch_bytes: int | None
    ) -> list[list[dict[str, Any]]]:
        if manifest is None:
            raise ValueError(f"{self.task_id}: load_batch_size needs the manifest to deal")
        chunks = [dict(c) for c in _manifest_chunks(manifest)]
        batches = (
            deal_chunks(chunks, sessions=max(int(sessions), 1), batch_bytes=batch_bytes)
            if batch_bytes
            else [[chunk] for chunk in chunks]  # rendered empty: one task per chunk
        )
        self.log.info(
            "%d chunk(s) dealt into %d load task(s) of %s",
            len(chunks),
            len(batches),
            ", ".join(str(len(b)) for b in batches) or "none",
        )
        return batches

    # -- inputs -----------------------------------------------------------------------------------
    def _read_manifest(self) -> ManifestInput:
        if self.staging_groups and not isinstance(self.manifest, str):
            raise ValueError(
                f"{self.task_id}: staging_groups need the manifest's S3 URI (the plan task's "
                f"manifest_uri) to write the input's manifest to, got {self.manifest!r}"
            )
        if not self.manifest:
            return None
        if isinstance(self.manifest, str):
            manifest = collected_manifest(
                self.staging_groups,
                self.manifest,
                s3=s3_client(self.aws_conn_id),
                # load batches are few; one load task per chunk is bounded as Airflow maps
                max_map_length=None if self._load_batch_bytes() else airflow_max_map_length(),
            )
            if self.staging_groups:
                self.log.info(
                    "collected %d staging group(s) into %s: %d chunk(s), %d rows",
                    len(self.staging_groups),
                    self.manifest,
                    len(manifest.chunks),
                    manifest.total_rows,
                )
            return manifest
        return self.manifest

    def _input_summary(self, manifest: ManifestInput) -> InputSummary | None:
        if manifest:
            if isinstance(manifest, Manifest):
                return InputSummary.from_manifest(manifest)
            sort_key = manifest.get("sort_key") if isinstance(manifest, Mapping) else None
            return InputSummary.from_chunks(_manifest_chunks(manifest), sort_key)
        if self.input_bytes not in (None, ""):
            return InputSummary(
                total_bytes=int(self.input_bytes),
                total_rows=int(self.input_rows) if self.input_rows not in (None, "") else None,
                sorted_by=tuple(self.sorted_by) if self.sorted_by else None,
            )
        return None

    def _options(self) -> LoadOptions:
        knobs = LoadPlan(parallelism=0, drop_indexes=False, sort=False, chunk_size=0).resolve(
            parallelism=self.parallelism,
            drop_indexes=self.drop_indexes,
            sort=self.sort,
            chunk_size=self.chunk_size,
        )
        return LoadOptions(
            method=self.method,
            parallelism=knobs.parallelism if _explicit(self.parallelism) else None,
            drop_indexes=knobs.drop_indexes if _explicit(self.drop_indexes) else None,
            sort=knobs.sort if _explicit(self.sort) else None,
            chunk_size=knobs.chunk_size if _explicit(self.chunk_size) else None,
            vcpus=int(self.vcpus) if self.vcpus not in (None, "") else None,
            load_start=_as_datetime(self.load_start),
            expected_duration=(
                self.expected_duration
                if isinstance(self.expected_duration, timedelta)
                else timedelta(minutes=int(self.expected_duration))
            ),
            bulk_mode=self.bulk_mode,
            mode=parse_mode(self.mode),
        )


def _manifest_chunks(
    manifest: Manifest | Mapping[str, Any] | Sequence[Mapping[str, Any]],
) -> list[Mapping[str, Any]]:
    """The chunk dicts of a read manifest, a manifest dict, one chunk dict or a list of them."""
    if isinstance(manifest, Manifest):
        return [c.to_dict() for c in manifest.chunks]
    if isinstance(manifest, Mapping):
        return list(manifest["chunks"]) if "chunks" in manifest else [manifest]
    return list(manifest)


def _explicit(value: Any) -> bool:
    return value is not None and value != AUTO


def _as_list(value: Sequence[str] | str) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


def _as_datetime(value: datetime | str | None) -> datetime:
    if value is None or value == "":
        return datetime.now(UTC)
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _failure_message(report: PreflightReport, failures: list[Any], fail_on: FailOn) -> str:
    severities = sorted({f.severity for f in failures}, key=lambda s: -Severity(s).rank)
    lines = [
        f"pre-flight for {report.table} found {len(failures)} finding(s) at "
        f"{'/'.join(s.value for s in severities)} (fail_on={fail_on!r}):"
    ]
    lines += [f"- [{f.severity.value}] {f.rule}: {f.message} Fix: {f.fix}" for f in failures]
    return "\n".join(lines)
