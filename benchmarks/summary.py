"""The pure half of ``benchmarks/run.py``: case results, ratios, the table, the JSON line, the
chart, and parsing the load report's summary line out of an Airflow log."""

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
    """One case's outcome. ``seconds`` is None when the case could not run (``note`` says why)."""

    name: str
    seconds: float | None
    rows: int
    peak_rss_mb: float | None = None
    note: str = ""
    stages: dict[str, float | None] = field(default_factory=dict)

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
    return CaseResult(
        runs[0].name,
        statistics.median(seconds),
        runs[0].rows,
        max(rss) if rss else None,
        runs[0].note,
        stages,
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
    """Seconds, rows/s, speed-up over naive (naive_s / s), times the floor (s / floor_s), RSS."""
    naive = seconds_of(results, "naive")
    floor = seconds_of(results, "floor")
    header = (
        f"{'case':<22} {'seconds':>9} {'rows/s':>12} {'vs naive':>9} {'x floor':>8} "
        f"{'peak RSS MB':>12}  note"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r.name:<22} {_cell(r.seconds, '9.2f')} {_cell(r.rows_per_second, '12,.0f')} "
            f"{_cell(ratio(naive, r.seconds), '9.2f')} {_cell(ratio(r.seconds, floor), '8.2f')} "
            f"{_cell(r.peak_rss_mb, '12.1f')}  {r.note}"
        )
    return "\n".join(lines)


def summary_json(engine: str, dataset: str, rows: int, results: Sequence[CaseResult]) -> str:
    """The run's last line: one JSON object with the headline numbers."""
    by_name = {r.name: r for r in results}
    pipeline = by_name.get("pipeline")
    naive_s = seconds_of(results, "naive")
    pipeline_s = seconds_of(results, "pipeline")
    floor_s = seconds_of(results, "floor")
    rss = [r.peak_rss_mb for r in results if r.peak_rss_mb is not None]
    summary: dict[str, Any] = {
        "engine": engine,
        "dataset": dataset,
        "rows": rows,
        "naive_s": _round(naive_s),
        "pipeline_s": _round(pipeline_s),
        "floor_s": _round(floor_s),
        "floor_unlogged_s": _round(seconds_of(results, "floor_unlogged")),
        "peers": {f"{r.name}_s": _round(r.seconds) for r in results if r.name in PEERS},
        "speedup_vs_naive": ratio(naive_s, pipeline_s),
        "ratio_to_floor": ratio(pipeline_s, floor_s),
        "pipeline_stages": {k: _round(v) for k, v in (pipeline.stages if pipeline else {}).items()},
        "pipeline_note": pipeline.note if pipeline and pipeline.seconds is None else None,
        "peak_rss_mb": max(rss) if rss else None,
        "cases": {r.name: _round(r.seconds) for r in results},
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
