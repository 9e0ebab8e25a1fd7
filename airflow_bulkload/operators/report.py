"""LoadReportOperator: one summary of a table's load: per-chunk results and time per stage."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import Context
from airflow.sdk.bases.xcom import BaseXCom
from airflow.sdk.exceptions import AirflowSkipException

from airflow_bulkload.exceptions import LoadVerificationError
from airflow_bulkload.knobs import parse_flag
from airflow_bulkload.modes import parse_mode
from airflow_bulkload.operators.base import TableTaskOperator

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

#: XCom key the pipeline's timing hooks push on every stage task: ``{"started": s, "ended": e}``
#: (epoch seconds of its execute()), one XCom per task instance, written when it ends
TIMING_KEY = "bulkload_timing"
#: the keys of releases that pushed the two marks apart (read for runs started before upgrading)
STARTED_AT_KEY = "bulkload_started_at"
ENDED_AT_KEY = "bulkload_ended_at"

# when each running task instance of this process started: one XCom write per task, not two
# (every write is a request to Airflow's API server, on the pipeline's critical path)
_started_at: dict[object, float] = {}


def _instance_key(context: Context) -> object:
    ti = context["ti"]
    return getattr(ti, "id", None) or id(ti)


def record_start(context: Context) -> None:
    """``pre_execute`` hook: note when a stage task started (for the load report)."""
    _started_at[_instance_key(context)] = datetime.now(UTC).timestamp()


def record_end(context: Context, result: Any = None) -> None:
    """``post_execute`` hook: push when a stage task started and ended (for the load report)."""
    ended = datetime.now(UTC).timestamp()
    started = _started_at.pop(_instance_key(context), None)
    context["ti"].xcom_push(key=TIMING_KEY, value={"started": started, "ended": ended})


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, Mapping)):  # one task's value, not a sequence of them
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    try:  # a mapped task's pull is a lazy sequence
        return list(value)
    except TypeError:
        return [value]


def asset_event_extra(
    summary: Mapping[str, Any], manifest: str | None, logical_date: Any
) -> dict[str, Any]:
    """What the report tells the consumers of the load's Assets about this load."""
    verification = summary.get("verification") or {}
    return {
        "table": summary.get("table"),
        "rows": summary.get("rows"),
        "bytes": summary.get("bytes"),
        "chunks": summary.get("chunks"),
        "chunks_loaded": summary.get("chunks_loaded"),
        "verified": bool(verification.get("verified")),
        "input_empty": bool(verification.get("input_empty")),
        "rejected_rows": int(verification.get("rejected_rows") or 0),
        "logical_date": logical_date.isoformat() if logical_date is not None else None,
        "manifest": manifest,
    }


def stage_seconds(starts: Sequence[float | None], ends: Sequence[float | None]) -> float | None:
    """Wall time of a stage from its tasks' start/end marks: first start to last end."""
    started = [s for s in starts if s is not None]
    ended = [e for e in ends if e is not None]
    if not started or not ended:
        return None
    return max(0.0, max(ended) - min(started))


def summarize(
    table: str, chunk_results: Sequence[Mapping[str, Any]], stages: Mapping[str, float | None]
) -> dict[str, Any]:
    """The report's numbers: totals over the chunk results and each stage's wall time."""
    loaded = [r for r in chunk_results if not r.get("skipped")]
    rows = sum(int(r.get("rows") or 0) for r in chunk_results)
    nbytes = sum(int(r.get("bytes") or 0) for r in chunk_results)
    load_seconds = stages.get("load")
    return {
        "table": table,
        "chunks": len(chunk_results),
        "chunks_loaded": len(loaded),
        "chunks_skipped": len(chunk_results) - len(loaded),
        "rows": rows,
        "bytes": nbytes,
        "rows_per_second": round(rows / load_seconds, 1) if load_seconds else None,
        "stage_seconds": {k: (round(v, 3) if v is not None else None) for k, v in stages.items()},
        "total_seconds": round(sum(v for v in stages.values() if v is not None), 3),
    }


def markdown_report(summary: Mapping[str, Any], chunk_results: Sequence[Mapping[str, Any]]) -> str:
    """The report as markdown tables, for the task log."""
    lines = [
        (
            "### Dry run of "
            if summary.get("verification", {}).get("dry_run")
            else "### Bulk load of "
        )
        + summary["table"],
        "",
        f"{summary['rows']:,} rows, {summary['bytes'] / 1e6:,.1f} MB in {summary['chunks']} "
        f"chunks ({summary['chunks_loaded']} loaded, {summary['chunks_skipped']} already loaded)"
        + (
            f", {summary['rows_per_second']:,.0f} rows/s during the load stage"
            if summary.get("rows_per_second")
            else ""
        ),
        "",
        *(
            ["**Input empty: 0 rows loaded.** Check that the day's export arrived.", ""]
            if summary.get("verification", {}).get("input_empty")
            else []
        ),
        *(
            [
                f"**{rejected:,} records set aside** (they do not read as the input's format; "
                f"max_errors): {', '.join(summary['verification'].get('rejects') or [])}",
                "",
            ]
            if (rejected := summary.get("verification", {}).get("rejected_rows"))
            else []
        ),
        *(
            [
                f"Input: {len(srcs)} object(s): "
                + ", ".join(srcs[:5])
                + (f" and {len(srcs) - 5} more" if len(srcs) > 5 else ""),
                "",
            ]
            if (srcs := summary.get("verification", {}).get("sources"))
            else []
        ),
        *(
            [f"**Checkpoint {summary['checkpoint']}**", ""]
            if str(summary.get("checkpoint") or "").startswith("skipped")
            else []
        ),
        "Verified in the table: "
        + (
            "; ".join(summary.get("verification", {}).get("checks") or ["nothing to check"])
            if summary.get("verification", {}).get("verified")
            else "no"
        ),
        "",
        "| stage | seconds |",
        "| --- | ---: |",
    ]
    for stage, seconds in summary["stage_seconds"].items():
        lines.append(f"| {stage} | {'-' if seconds is None else f'{seconds:.2f}'} |")
    lines += [
        "",
        "| chunk | rows | MB | seconds | rows/s | skipped |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in chunk_results:
        lines.append(
            f"| {str(r.get('uri', '')).rsplit('/', 1)[-1]} | {int(r.get('rows') or 0):,} "
            f"| {int(r.get('bytes') or 0) / 1e6:.1f} | {float(r.get('seconds') or 0):.2f} "
            f"| {float(r.get('rows_per_second') or 0):,.0f} | {bool(r.get('skipped'))} |"
        )
    return "\n".join(lines)


class LoadReportOperator(TableTaskOperator):
    """Collect a table load's per-chunk results and stage timings into one summary.

    First it checks that the table holds what the summary claims.

    The summary goes to XCom (rows, bytes, chunks loaded/skipped, rows/s, seconds per stage,
    what was verified and how) and to the task log as markdown tables. With ``conn_id`` and
    ``manifest``, the table is the truth: every chunk must be in the ledger, each chunk's first
    and last key in the table, and when the table was empty before the load its row count must
    equal the input's (:meth:`~airflow_bulkload.hooks.BulkLoadHook.verify_load`); a mismatch
    fails the task with the numbers and the chunks.

    :param table: the table the load was for (named in the report).
    :param load_task_id: the mapped chunk-load task whose results are summed.
    :param stage_task_ids: report name -> task id, in pipeline order; each task's start/end marks
        (pushed by :func:`record_start`/:func:`record_end`) give the stage's wall time.
    :param conn_id: the target's connection; without it the table is not checked.
    :param manifest: S3 URI of the loaded input's manifest (the stage task's ``manifest_uri``).
    :param aws_conn_id: AWS connection to read the manifest.
    :param mode: the load's mode (``append``/``replace``/``upsert``); an upsert's rows were
        checked when they merged.
    :param outlets: Assets the load updates; each gets an event whose extra carries the load's
        numbers. An empty input skips the task instead: no event, so no consumer runs on nothing.
    :param validate_only: the report of a dry run (the load tasks' ``validate_only``): what
        would load, and nothing checked in the table, which the run did not change.
    """

    template_fields: Sequence[str] = ("table", "conn_id", "manifest", "validate_only", "mode")
    ui_color = "#e8f5e9"
    #: the summary once the table is checked, for OpenLineage (set by ``execute``)
    _summary: dict[str, Any] | None = None

    def __init__(
        self,
        *,
        table: str,
        load_task_id: str,
        stage_task_ids: Mapping[str, str],
        conn_id: str | None = None,
        manifest: str | None = None,
        aws_conn_id: str | None = "aws_default",
        validate_only: bool | str = False,
        mode: str = "append",
        **kwargs: Any,
    ) -> None:
        # no connection (""): the report sums the load tasks' results without checking the table
        super().__init__(table=table, conn_id=conn_id or "", aws_conn_id=aws_conn_id, **kwargs)
        self.load_task_id = load_task_id
        self.stage_task_ids = stage_task_ids
        self.manifest = manifest
        self.validate_only = validate_only
        self.mode = mode

    def _dry_run_verification(self) -> dict[str, Any]:
        """What a dry run can say: the manifest's counts; the table was not touched."""
        from airflow_bulkload.s3io import s3_client
        from airflow_bulkload.staging.manifest import read_manifest

        found = read_manifest(s3_client(self.aws_conn_id), self.manifest) if self.manifest else None
        return {
            "verified": False,
            "dry_run": True,
            "checks": ["dry run: each chunk read into a temporary copy of the table, none kept"],
            "rows_expected": found.total_rows if found else None,
            "sources": found.sources if found else [],
            "rejected_rows": found.rejected_rows if found else 0,
            "rejects": found.rejects if found else [],
        }

    def _describe_asset_events(self, context: Context, summary: Mapping[str, Any]) -> None:
        """Put the load's numbers in the extra of each outlet Asset's event."""
        if not self.outlets:
            return
        extra = asset_event_extra(summary, self.manifest, context.get("logical_date"))
        for outlet in self.outlets:
            context["outlet_events"][outlet].extra.update(extra)

    def execute(self, context: Context) -> dict[str, Any]:
        ti = context["ti"]
        results = [
            r
            # no map_indexes: every map index's value (one value when there is one), a chunk's
            # result or a batch's list of them
            for value in _as_list(ti.xcom_pull(task_ids=self.load_task_id))
            for r in (value if isinstance(value, list) else [value])
            if isinstance(r, Mapping)
        ]
        stages: dict[str, float | None] = {}
        for name, task_id in self.stage_task_ids.items():
            marks = [m for m in _as_list(ti.xcom_pull(task_ids=task_id, key=TIMING_KEY)) if m]
            if marks:
                starts = [m.get("started") for m in marks if isinstance(m, Mapping)]
                ends = [m.get("ended") for m in marks if isinstance(m, Mapping)]
            else:  # a task that ran before an upgrade pushed the two marks apart
                starts = _as_list(ti.xcom_pull(task_ids=task_id, key=STARTED_AT_KEY))
                ends = _as_list(ti.xcom_pull(task_ids=task_id, key=ENDED_AT_KEY))
            stages[name] = stage_seconds(starts, ends)
        summary = summarize(self.table, results, stages)
        # a checkpoint task of its own, or the pipeline's finalize that checkpoints itself
        checkpointed_by = self.stage_task_ids.get("checkpoint") or self.stage_task_ids.get(
            "finalize_table"
        )
        if checkpointed_by:
            checkpoint = ti.xcom_pull(task_ids=checkpointed_by)
            if isinstance(checkpoint, Mapping):
                checkpoint = checkpoint.get("checkpoint")
            summary["checkpoint"] = checkpoint if isinstance(checkpoint, str) else None
        if parse_flag(self.validate_only, "validate_only"):
            summary["verification"] = self._dry_run_verification()
        elif self.conn_id and self.manifest:
            hook = self.bulk_load_hook()
            load_id = f"{context['dag'].dag_id}/{context['run_id']}"
            summary["verification"] = hook.verify_load(
                self.table, self.manifest, load_id=load_id, mode=parse_mode(self.mode)
            )
            summary["mode"] = parse_mode(self.mode)
            if summary["verification"].get("rows_expected") is None and summary["mode"] == "upsert":
                # direct chunks are counted as they load: the merged input is what they loaded
                summary["verification"]["rows_expected"] = summary["rows"]
        else:
            summary["verification"] = {"verified": False, "checks": ["not checked: no conn_id"]}
        if summary["verification"].get("input_empty"):
            self.log.warning("%s: the input is empty: 0 rows, input empty", self.table)
            if summary.get("mode") == "replace":
                # the table was left as it was: a green run would claim it holds the input
                raise LoadVerificationError(
                    f"{self.table}: the input is empty, so the replace changed nothing: the table "
                    "still holds its old rows, not the input (to empty it on purpose, TRUNCATE it)"
                )
        if summary["verification"].get("rejected_rows"):
            self.log.warning(
                "%s: %d input records were set aside, not loaded (max_errors): %s",
                self.table,
                summary["verification"]["rejected_rows"],
                ", ".join(summary["verification"].get("rejects") or []),
            )
        self._describe_asset_events(context, summary)
        self.log.info("load report\n%s", markdown_report(summary, results))
        # one machine-readable line, for scripts that read the task log
        self.log.info("BULKLOAD_REPORT %s", json.dumps(summary))  # stages in pipeline order
        self._summary = summary
        if self.outlets and summary["verification"].get("input_empty"):
            # consumers of the Assets would run on a load that added nothing: skip, which emits
            # no Asset event, and keep the summary where the return value would be
            ti.xcom_push(key=BaseXCom.XCOM_RETURN_KEY, value=summary)
            raise AirflowSkipException(
                f"{self.table}: the input is empty, nothing loaded: no Asset event for "
                + ", ".join(getattr(o, "uri", str(o)) for o in self.outlets)
            )
        return summary

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """OpenLineage for the whole load: the input objects in, the table out.

        The table comes with its schema and the load's rows and bytes; only for a load checked
        against the table (nothing otherwise).
        """
        from airflow.providers.openlineage.extractors import OperatorLineage

        from airflow_bulkload.lineage import load_lineage

        summary = self._summary
        if summary is None or not summary["verification"].get("verified"):
            return OperatorLineage()
        return load_lineage(
            self.bulk_load_hook(),
            self.table,
            summary["verification"].get("sources") or [],
            rows=int(summary["rows"]),
            nbytes=int(summary["bytes"]),
        )
