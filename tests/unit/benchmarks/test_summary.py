"""The pure parts of benchmarks/run.py: ratios, medians, the table, the JSON line, report parsing."""

from __future__ import annotations

import json

from benchmarks.cases import pipeline_stages, split_csv
from benchmarks.run import select_cases
from benchmarks.summary import (
    CaseResult,
    format_table,
    median_result,
    parse_report_line,
    ratio,
    stages_from_report,
    summary_json,
)

RESULTS = [
    CaseResult("naive", 40.0, 1000, 10.0),
    CaseResult("pipeline", 8.0, 1000, 300.0, stages={"stage": 2.0, "load": 6.0}),
    CaseResult("pgloader", None, 1000, note="pgloader is not installed"),
    CaseResult("floor", 5.0, 1000, 12.0),
]


def test_ratio_rounds_and_handles_missing_values() -> None:
    assert ratio(40.0, 8.0) == 5.0
    assert ratio(8.0, 3.0) == 2.67
    assert ratio(None, 8.0) is None
    assert ratio(8.0, 0.0) is None


def test_summary_json_is_one_line_with_the_headline_numbers() -> None:
    line = summary_json("postgres", "classic", 1000, RESULTS)
    assert "\n" not in line
    summary = json.loads(line)
    assert summary["engine"] == "postgres"
    assert summary["rows"] == 1000
    assert summary["naive_s"] == 40.0
    assert summary["pipeline_s"] == 8.0
    assert summary["floor_s"] == 5.0
    assert summary["speedup_vs_naive"] == 5.0
    assert summary["ratio_to_floor"] == 1.6
    assert summary["peers"] == {"pgloader_s": None}
    assert summary["pipeline_stages"] == {"stage": 2.0, "load": 6.0}
    assert summary["peak_rss_mb"] == 300.0


def test_summary_json_without_pipeline_reports_null() -> None:
    missing = CaseResult("pipeline", None, 1000, note="not importable")
    summary = json.loads(summary_json("mysql", "classic", 1000, [RESULTS[0], missing]))
    assert summary["pipeline_s"] is None
    assert summary["speedup_vs_naive"] is None
    assert summary["pipeline_note"] == "not importable"


def test_table_has_ratios_and_dashes_for_missing_cases() -> None:
    lines = format_table(RESULTS).splitlines()
    pipeline = next(line for line in lines if line.startswith("pipeline"))
    assert "5.00" in pipeline  # 40 / 8 faster than naive
    assert "1.60" in pipeline  # 8 / 5 of the floor
    assert "125" in pipeline  # 1000 rows / 8 s
    pgloader = next(line for line in lines if line.startswith("pgloader"))
    assert pgloader.split()[1] == "-"
    assert pgloader.endswith("pgloader is not installed")


def test_median_over_repeats_and_failure_wins() -> None:
    runs = [CaseResult("naive", s, 10, r, stages={"load": s}) for s, r in [(3, 1), (1, 5), (2, 2)]]
    median = median_result(runs)
    assert median.seconds == 2
    assert median.stages == {"load": 2}
    assert median.peak_rss_mb == 5
    failed = CaseResult("naive", None, 10, note="VERIFY FAILED")
    assert median_result([*runs, failed]).note == "VERIFY FAILED"


def test_parse_report_line_takes_the_last_summary_and_ignores_trailing_text() -> None:
    log = "\n".join(
        [
            '[2026-01-02] INFO - BULKLOAD_REPORT {"rows": 1}',
            "noise",
            '[2026-01-02] INFO - BULKLOAD_REPORT {"rows": 2, "stage_seconds": {"load": 1.5, '
            '"checkpoint": null}} source=airflow.task',
        ]
    )
    report = parse_report_line(log)
    assert report is not None and report["rows"] == 2
    assert stages_from_report(report) == {"load": 1.5, "checkpoint": None}
    assert parse_report_line("BULKLOAD_REPORT not json") is None


def test_pipeline_stages_add_teardowns_from_task_durations() -> None:
    stages = pipeline_stages(
        {"load": 4.0}, {"load_bench.restore_table": 0.5, "load_bench.exit_bulk_mode": 0.2}
    )
    assert stages == {"load": 4.0, "restore_table": 0.5, "exit_bulk_mode": 0.2}


def test_select_cases_expands_peers_and_filters_by_engine() -> None:
    assert select_cases("naive,peers,floor,floor_unlogged", "mysql") == [
        "naive",
        "s3_to_sql",
        "mariadb_import",
        "floor",
    ]
    assert select_cases("peers", "postgres") == ["s3_to_sql", "pgloader"]


def test_split_csv_keeps_every_row_once_and_the_header_in_each_part(tmp_path) -> None:
    source = tmp_path / "in.csv"
    source.write_text("id,a\n" + "".join(f"{i},{i * 2}\n" for i in range(101)))
    parts = split_csv(source, 3, tmp_path / "parts", "p{n}.csv")
    rows = []
    for part in parts:
        lines = part.read_text().splitlines()
        assert lines[0] == "id,a"
        rows += lines[1:]
    assert sorted(rows) == sorted(f"{i},{i * 2}" for i in range(101))
