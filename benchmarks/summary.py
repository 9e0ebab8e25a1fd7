"""The pure half of ``benchmarks/run.py``: case results, ratios (from wall times), the table, the
JSON line, the charts, the scaling series, and parsing the load report's summary line out of an
Airflow log."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPORT_MARKER = "BULKLOAD_REPORT "


@dataclass
class CaseResult:
    """One case's outcome. ``seconds`` is its wall time (the pipeline's: the DAG run's, queued to
    end), None when the case could not run (``note`` says why)."""

    name: str
    seconds: float | None
    rows: int
    peak_rss_mb: float | None = None
    note: str = ""
    stages: dict[str, float | None] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_second(self) -> float | None:
        return self.rows / self.seconds if self.seconds else None


def median_result(runs: Sequence[CaseResult]) -> CaseResult:
    """The median over repeats (seconds and stages); a case that failed once counts as failed."""
    failed = next((r for r in runs if r.seconds is None), None)
    if failed is not None:
        return failed
    seconds = [r.seconds for r in runs if r.seconds is not None]
    stages = {name: _median_or_none([r.stages.get(name) for r in runs]) for name in runs[0].stages}
    rss = [r.peak_rss_mb for r in runs if r.peak_rss_mb is not None]
    median = statistics.median(seconds)
    # the note and details of the run nearest the median (they describe one run)
    nearest = min(runs, key=lambda r: abs((r.seconds or 0.0) - median))
    return CaseResult(
        runs[0].name,
        median,
        runs[0].rows,
        max(rss) if rss else None,
        nearest.note,
        stages,
        nearest.details,
    )


def _median_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` rounded to 2 places, None when either is unknown or zero."""
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 2)


def seconds_of(results: Sequence[CaseResult], name: str) -> float | None:
    return next((r.seconds for r in results if r.name == name), None)


def _cell(value: float | None, spec: str) -> str:
    width = int(spec.split(".")[0].replace(",", ""))
    return f"{'-':>{width}}" if value is None else format(value, spec)


def format_table(results: Sequence[CaseResult]) -> str:
    """Wall seconds, rows/s, speed-up over naive (naive_s / s), times the floor (s / floor_s),
    peak RSS, then the floor's phases and the pipeline's stages and tasks."""
    naive = seconds_of(results, "naive")
    floor = seconds_of(results, "floor")
    header = (
        f"{'case':<22} {'wall s':>9} {'rows/s':>12} {'vs naive':>9} {'x floor':>8} "
        f"{'peak RSS MB':>12}  note"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r.name:<22} {_cell(r.seconds, '9.2f')} {_cell(r.rows_per_second, '12,.0f')} "
            f"{_cell(ratio(naive, r.seconds), '9.2f')} {_cell(ratio(r.seconds, floor), '8.2f')} "
            f"{_cell(r.peak_rss_mb, '12.1f')}  {r.note}"
        )
    lines += _detail_lines(results)
    return "\n".join(lines)


def _detail_lines(results: Sequence[CaseResult]) -> list[str]:
    by_name = {r.name: r for r in results if r.seconds is not None}
    lines: list[str] = []
    floor = by_name.get("floor")
    if floor and floor.stages:
        phases = ", ".join(f"{k} {_fmt(v)}" for k, v in floor.stages.items())
        lines.append(f"floor phases (s): {phases}")
    for name in ("pipeline", "pipeline_staged"):
        if name in by_name:
            lines += [line.replace("pipeline", name, 1) for line in pipeline_lines(by_name[name])]
    return ["", *lines] if lines else []


def pipeline_lines(result: CaseResult) -> list[str]:
    """The pipeline's stages (the load report's, plus the teardowns) and its tasks' peaks."""
    details = result.details
    stages = ", ".join(f"{k} {_fmt(v)}" for k, v in result.stages.items())
    lines = [
        f"pipeline stages (s): {stages}",
        f"pipeline: DAG run wall {_fmt(details.get('wall_s'))} s (queued->end), running "
        f"{_fmt(details.get('running_s'))} s (start->end), stage sum "
        f"{_fmt(details.get('stage_sum_s'))} s, staged under the prefix (manifests aside) "
        f"{_fmt(details.get('staged_mb'), 1)} MB",
    ]
    tasks = details.get("tasks") or {}
    if tasks:
        lines.append(
            "pipeline tasks (longest s / peak RSS MB / peak temp MB): "
            + ", ".join(
                f"{name}{'' if t['instances'] == 1 else ' x' + str(t['instances'])} "
                f"{_fmt(t['max_s'])}/{_fmt(t['peak_rss_mb'], 0)}/{_fmt(t['peak_temp_mb'], 1)}"
                for name, t in tasks.items()
            )
        )
    timeline = details.get("timeline") or []
    if timeline:
        lines.append(
            "pipeline timeline (s after the run was queued: queued/start/end): "
            + ", ".join(
                f"{t['task_id']}{'' if t['map_index'] < 0 else '[' + str(t['map_index']) + ']'} "
                f"{_fmt(t['queued'])}/{_fmt(t['started'])}/{_fmt(t['ended'])}"
                for t in timeline
            )
        )
    return lines


def _fmt(value: float | None, places: int = 2) -> str:
    return "-" if value is None else f"{value:.{places}f}"


def summary_json(
    engine: str,
    dataset: str,
    rows: int,
    results: Sequence[CaseResult],
    extra: Mapping[str, Any] | None = None,
) -> str:
    """The run's last line: one JSON object with the headline numbers. Every ratio is of wall
    times: ``ratio_to_floor`` = pipeline / floor, ``speedup_vs_naive`` = naive / pipeline."""
    by_name = {r.name: r for r in results}
    pipeline = by_name.get("pipeline")
    floor = by_name.get("floor")
    naive_s = seconds_of(results, "naive")
    pipeline_s = seconds_of(results, "pipeline")
    floor_s = seconds_of(results, "floor")
    rss = [r.peak_rss_mb for r in results if r.peak_rss_mb is not None]
    pipeline_stages = pipeline.stages if pipeline else {}
    floor_stages = floor.stages if floor and floor.seconds is not None else {}
    details = pipeline.details if pipeline and pipeline.seconds is not None else {}
    summary: dict[str, Any] = {
        "engine": engine,
        "dataset": dataset,
        "rows": rows,
        **(extra or {}),
        "naive_s": _round(naive_s),
        "pipeline_s": _round(pipeline_s),
        "floor_s": _round(floor_s),
        "floor_unlogged_s": _round(seconds_of(results, "floor_unlogged")),
        "peers": {f"{r.name}_s": _round(r.seconds) for r in results if r.name in PEERS},
        "speedup_vs_naive": ratio(naive_s, pipeline_s),
        "ratio_to_floor": ratio(pipeline_s, floor_s),
        "pipeline_staged_s": _round(seconds_of(results, "pipeline_staged")),
        "staged_speedup_vs_naive": ratio(naive_s, seconds_of(results, "pipeline_staged")),
        "staged_ratio_to_floor": ratio(seconds_of(results, "pipeline_staged"), floor_s),
        "floor_load_s": _round(floor_stages.get("load")),
        "floor_indexes_s": _round(floor_stages.get("indexes")),
        "finalize_to_floor_indexes": ratio(
            pipeline_stages.get("finalize_table"), floor_stages.get("indexes")
        ),
        "pipeline_stage_sum_s": details.get("stage_sum_s"),
        "pipeline_staged_mb": details.get("staged_mb"),
        "pipeline_running_s": details.get("running_s"),
        "pipeline_stages": {k: _round(v) for k, v in pipeline_stages.items()},
        "pipeline_tasks": details.get("tasks"),
        "pipeline_max_concurrent": details.get("max_concurrent"),
        "pipeline_note": pipeline.note if pipeline and pipeline.seconds is None else None,
        "peak_rss_mb": max(rss) if rss else None,
        "cases": {r.name: _round(r.seconds) for r in results},
    }
    return json.dumps(summary, sort_keys=False)


# -- the scaling series ---------------------------------------------------------------------------
def format_scaling(points: Sequence[CaseResult]) -> str:
    """One line per input size (the pipeline alone), then each size's stages and tasks."""
    header = (
        f"{'rows':>12} {'wall s':>9} {'rows/s':>12} {'stage sum s':>12} "
        f"{'max task RSS MB':>16} {'max task temp MB':>17}  note"
    )
    lines = [header, "-" * len(header)]
    for p in points:
        tasks = p.details.get("tasks") or {}
        lines.append(
            f"{p.rows:>12,} {_cell(p.seconds, '9.2f')} {_cell(p.rows_per_second, '12,.0f')} "
            f"{_cell(p.details.get('stage_sum_s'), '12.2f')} "
            f"{_cell(_task_max(tasks, 'peak_rss_mb'), '16.1f')} "
            f"{_cell(_task_max(tasks, 'peak_temp_mb'), '17.1f')}  {p.note}"
        )
    for p in points:
        if p.seconds is not None:
            lines += ["", f"{p.rows:,} rows:", *pipeline_lines(p)]
    return "\n".join(lines)


def _task_max(tasks: Mapping[str, Mapping[str, Any]], key: str) -> float | None:
    values = [t[key] for t in tasks.values() if t.get(key) is not None]
    return max(values) if values else None


def scaling_json(
    engine: str, dataset: str, points: Sequence[CaseResult], extra: Mapping[str, Any] | None = None
) -> str:
    """The scaling run's last line: rows/s, stage sums and per-task peaks per size, and the
    largest size's rows/s against the size before it."""
    done = [p for p in points if p.rows_per_second]
    last_two = done[-2:]
    summary: dict[str, Any] = {
        "engine": engine,
        "dataset": dataset,
        **(extra or {}),
        "scaling": [
            {
                "rows": p.rows,
                "wall_s": _round(p.seconds),
                "rows_per_s": None if p.rows_per_second is None else round(p.rows_per_second),
                "stage_sum_s": p.details.get("stage_sum_s"),
                "stages": {k: _round(v) for k, v in p.stages.items()},
                "tasks": p.details.get("tasks"),
                "peak_temp_total_mb": p.details.get("peak_temp_total_mb"),
                "note": p.note,
            }
            for p in points
        ],
        "largest_vs_previous_rows_per_s": ratio(
            last_two[-1].rows_per_second, last_two[0].rows_per_second
        )
        if len(last_two) == 2
        else None,
    }
    return json.dumps(summary, sort_keys=False)


#: peer case names (reported under "peers" in the JSON line)
PEERS = ("pgloader", "mariadb_import", "s3_to_sql")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def parse_report_line(log_text: str) -> dict[str, Any] | None:
    """The last ``BULKLOAD_REPORT {json}`` summary in a log (text may follow the JSON)."""
    decoder = json.JSONDecoder()
    for line in reversed(log_text.splitlines()):
        if REPORT_MARKER not in line:
            continue
        try:
            value, _ = decoder.raw_decode(line.split(REPORT_MARKER, 1)[1].lstrip())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def stages_from_report(report: Mapping[str, Any]) -> dict[str, float | None]:
    stages = report.get("stage_seconds") or {}
    return {str(k): (None if v is None else float(v)) for k, v in stages.items()}


def bar_chart(
    path: Path, title: str, results: Sequence[CaseResult]
) -> Path:  # pragma: no cover - drawing
    """Seconds per case as a horizontal bar chart (PNG, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in results if r.seconds is not None]
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(shown) + 1.5))
    ax.barh([r.name for r in shown], [r.seconds or 0.0 for r in shown], color="#4c72b0")
    for y, r in enumerate(shown):
        ax.text(r.seconds or 0.0, y, f" {r.seconds:.1f} s {r.note}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")  # the cases span three orders of magnitude
    ax.set_xlim(right=max(r.seconds or 0.0 for r in shown) * 30)  # room for the labels
    ax.set_xlabel("seconds, log scale (lower is better)")
    ax.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def scaling_chart(
    path: Path, title: str, points: Sequence[CaseResult]
) -> Path:  # pragma: no cover - drawing
    """rows/s and the largest task's peak RSS against the input size (PNG, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [p for p in points if p.rows_per_second]
    fig, ax = plt.subplots(figsize=(8, 4))
    speeds = [p.rows_per_second or 0.0 for p in shown]
    ax.plot([p.rows for p in shown], speeds, "o-", color="#4c72b0")
    ax.set_xscale("log")
    ax.set_xlabel("rows (log scale)")
    ax.set_ylabel("rows/s (DAG run wall time)", color="#4c72b0")
    ax.set_ylim(bottom=0)
    rss = ax.twinx()
    peaks = [_task_max(p.details.get("tasks") or {}, "peak_rss_mb") or 0.0 for p in shown]
    rss.plot([p.rows for p in shown], peaks, "s--", color="#dd8452")
    rss.set_ylabel("largest task's peak RSS, MB", color="#dd8452")
    # headroom above the highest peak, so a flat line does not hide in the frame
    rss.set_ylim(bottom=0, top=max(peaks, default=0.0) * 1.5 or None)
    ax.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
