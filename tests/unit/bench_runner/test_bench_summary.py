"""The pure parts of benchmarks/run.py: ratios (of wall times), medians, the table, the JSON
line, the scaling series, report parsing, and the S3 stream helpers."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from benchmarks.cases import head_part, per_stage_peaks, pipeline_stages
from benchmarks.cluster import ScheduledRun, TaskUse, most_at_once
from benchmarks.run import parse_args, parse_rows_list, parse_size, select_cases
from benchmarks.s3data import S3Input, drop_first_line, gunzip_blocks
from benchmarks.summary import (
    CaseResult,
    format_scaling,
    format_table,
    median_result,
    parse_report_line,
    ratio,
    scaling_json,
    stages_from_report,
    summary_json,
)

PIPELINE_DETAILS = {
    "wall_s": 8.0,
    "running_s": 7.5,
    "stage_sum_s": 6.5,
    "tasks": {
        "stage": {"instances": 1, "max_s": 2.4, "peak_rss_mb": 300.0, "peak_temp_mb": 40.0},
        "load": {"instances": 2, "max_s": 3.1, "peak_rss_mb": 120.0, "peak_temp_mb": 0.0},
    },
    "max_concurrent": {"load": 2},
    "timeline": [
        {"task_id": "stage", "map_index": -1, "queued": 0.9, "started": 1.1, "ended": 1.8},
        {"task_id": "load", "map_index": 0, "queued": 2.0, "started": 2.2, "ended": 6.0},
        {"task_id": "report", "map_index": -1, "queued": 6.4, "started": None, "ended": None},
    ],
}
RESULTS = [
    CaseResult("naive", 40.0, 1000, 10.0),
    CaseResult(
        "pipeline",
        8.0,
        1000,
        300.0,
        stages={"stage": 2.0, "load": 4.0, "finalize_table": 0.5},
        details=PIPELINE_DETAILS,
    ),
    CaseResult("pgloader", None, 1000, note="pgloader is not installed"),
    CaseResult("floor", 5.0, 1000, 12.0, stages={"load": 4.6, "indexes": 0.4}),
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
    assert (summary["naive_s"], summary["pipeline_s"], summary["floor_s"]) == (40.0, 8.0, 5.0)
    # the ratios are of wall times: the pipeline's DAG run (8.0), not its stage sum (6.5)
    assert summary["speedup_vs_naive"] == 5.0
    assert summary["ratio_to_floor"] == 1.6
    assert summary["pipeline_stage_sum_s"] == 6.5
    assert summary["pipeline_running_s"] == 7.5
    assert summary["peers"] == {"pgloader_s": None}
    assert summary["pipeline_stages"] == {"stage": 2.0, "load": 4.0, "finalize_table": 0.5}
    assert summary["pipeline_tasks"]["load"]["instances"] == 2
    assert (summary["floor_load_s"], summary["floor_indexes_s"]) == (4.6, 0.4)
    assert summary["finalize_to_floor_indexes"] == 1.25
    assert summary["peak_rss_mb"] == 300.0


def test_summary_json_carries_the_run_description() -> None:
    extra = {"input": {"parts": 8}, "settings": "innodb_buffer_pool_size 4,096 MiB"}
    summary = json.loads(summary_json("mysql", "classic", 1000, RESULTS, extra))
    assert summary["input"] == {"parts": 8}
    assert summary["settings"].startswith("innodb_buffer_pool_size")


def test_summary_json_without_pipeline_reports_null_and_why() -> None:
    missing = CaseResult("pipeline", None, 1000, note="not importable")
    summary = json.loads(summary_json("mysql", "classic", 1000, [RESULTS[0], missing]))
    assert summary["pipeline_s"] is None
    assert summary["speedup_vs_naive"] is None
    assert summary["pipeline_note"] == "not importable"


def test_table_has_ratios_and_dashes_for_missing_cases() -> None:
    lines = format_table(RESULTS).splitlines()
    pipeline = next(line for line in lines if line.startswith("pipeline"))
    assert "5.00" in pipeline  # 40 / 8: faster than naive
    assert "1.60" in pipeline  # 8 / 5: times the floor
    assert "125" in pipeline  # 1000 rows / 8 s
    pgloader = next(line for line in lines if line.startswith("pgloader"))
    assert pgloader.split()[1] == "-"
    assert pgloader.endswith("pgloader is not installed")
    assert "floor phases (s): load 4.60, indexes 0.40" in lines
    assert any("stage sum 6.50 s" in line and "wall 8.00 s" in line for line in lines)
    assert any("load x2 3.10/120/0.0" in line for line in lines)


def test_median_over_repeats_and_a_failure_wins() -> None:
    runs = [
        CaseResult("naive", s, 10, r, stages={"load": s}, details={"wall_s": s})
        for s, r in [(3.0, 1.0), (1.0, 5.0), (2.0, 2.0)]
    ]
    median = median_result(runs)
    assert median.seconds == 2.0
    assert median.stages == {"load": 2.0}
    assert median.peak_rss_mb == 5.0
    assert median.details == {"wall_s": 2.0}  # the median run's own details
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


def test_pipeline_stages_add_the_teardowns_from_task_durations() -> None:
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


def _point(rows: int, seconds: float | None, rss: float) -> CaseResult:
    tasks = {"load": {"instances": 4, "max_s": 1.0, "peak_rss_mb": rss, "peak_temp_mb": 0.5}}
    details = {"stage_sum_s": (seconds or 0) / 2, "tasks": tasks, "peak_temp_total_mb": 1.0}
    return CaseResult("pipeline", seconds, rows, rss, "note", {"load": 1.0}, details)


def test_scaling_table_and_json_per_size() -> None:
    points = [_point(1000, 2.0, 100.0), _point(10_000, 10.0, 110.0), _point(50_000, 60.0, 115.0)]
    table = format_scaling(points).splitlines()
    assert table[2].split()[:3] == ["1,000", "2.00", "500"]
    assert "10,000 rows:" in table
    summary = json.loads(scaling_json("postgres", "classic", points, {"parts": 8}))
    assert [p["rows_per_s"] for p in summary["scaling"]] == [500, 1000, 833]
    assert summary["scaling"][2]["tasks"]["load"]["peak_rss_mb"] == 115.0
    assert summary["largest_vs_previous_rows_per_s"] == 0.83
    assert summary["parts"] == 8
    failed = json.loads(scaling_json("mysql", "classic", [_point(5, None, 1.0)]))
    assert failed["largest_vs_previous_rows_per_s"] is None


def test_most_at_once_counts_overlapping_spans() -> None:
    assert most_at_once([]) == 0
    assert most_at_once([(0.0, 2.0), (1.0, 3.0), (2.5, 4.0)]) == 2
    assert most_at_once([(0.0, 1.0), (1.0, 2.0)]) == 1  # one ends as the next starts


def test_per_stage_peaks_takes_mapped_instances_together() -> None:
    run = ScheduledRun(
        state="success",
        wall_seconds=3.0,
        running_seconds=2.5,
        tasks=[
            TaskUse("load_bench.stage", -1, 1.0, 250.0, 12.0),
            TaskUse("load_bench.load", 0, 0.5, 100.0, None),
            TaskUse("load_bench.load", 1, 0.7, 90.0, 0.0),
        ],
        report=None,
    )
    assert per_stage_peaks(run) == {
        "stage": {"instances": 1, "max_s": 1.0, "peak_rss_mb": 250.0, "peak_temp_mb": 12.0},
        "load": {"instances": 2, "max_s": 0.7, "peak_rss_mb": 100.0, "peak_temp_mb": 0.0},
    }


def test_gunzip_blocks_handles_members_and_odd_block_boundaries() -> None:
    data = b"id,a\n" + b"".join(b"%d,%d\n" % (i, i * 2) for i in range(5000))
    packed = gzip.compress(data[:7000]) + gzip.compress(data[7000:])  # two members
    blocks = [packed[i : i + 333] for i in range(0, len(packed), 333)]
    assert b"".join(gunzip_blocks(iter(blocks))) == data
    body = b"".join(drop_first_line(gunzip_blocks(iter(blocks))))
    assert body == data[len(b"id,a\n") :]


def test_drop_first_line_with_the_header_split_across_blocks() -> None:
    assert b"".join(drop_first_line(iter([b"i", b"d,a", b"\n1,2\n", b"3,4\n"]))) == b"1,2\n3,4\n"
    assert b"".join(drop_first_line(iter([b"id,a\n"]))) == b""
    assert b"".join(drop_first_line(iter([b"no newline"]))) == b""


def test_head_part_keeps_the_header_and_the_first_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = b"".join(b"%d,x\n" % i for i in range(100))
    blocks = [b"id,b\n" + rows[:37], rows[37:250], rows[250:]]
    monkeypatch.setattr("benchmarks.cases.stream_part", lambda *a, **k: iter(blocks))
    monkeypatch.setattr(S3Input, "client", lambda self: None)
    source = S3Input("http://x", "b", "p/", ("p/0.csv.gz",), (), 0, 0)
    text = head_part(source, 30, tmp_path / "slice.csv").read_bytes().splitlines()
    assert text[0] == b"id,b" and len(text) == 31 and text[-1] == b"29,x"


def test_run_options() -> None:
    assert parse_size("4G") == 4 << 30
    assert parse_size("512MiB") == 512 << 20
    assert parse_size("keep") == parse_size("0") == 0
    assert parse_rows_list("1000000,1e7, 50_000_000") == [1_000_000, 10_000_000, 50_000_000]
    args = parse_args(["--engine", "mysql", "--scaling", "1000,2000", "--mysql-buffer-pool", "1G"])
    assert args.scaling == [1000, 2000] and args.mysql_buffer_pool == 1 << 30
    assert args.airflow_parallelism >= 2
    with pytest.raises(SystemExit):
        parse_args(["--engine", "mysql", "--airflow-parallelism", "1"])


def test_the_pipeline_runs_on_airflows_own_default_parallelism() -> None:
    """As a deployment that leaves ``[core] parallelism`` alone: with barely more worker slots
    than the pipeline's fan-out, finished tasks' lingering supervisors queued its loads."""
    from airflow.configuration import conf

    default = int(conf.get_default_value("core", "parallelism"))
    assert parse_args(["--engine", "postgres"]).airflow_parallelism == default


def test_the_pipeline_timeline_is_printed_in_start_order() -> None:
    from benchmarks.summary import pipeline_lines

    [line] = [line for line in pipeline_lines(RESULTS[1]) if "timeline" in line]
    assert line.endswith("stage 0.90/1.10/1.80, load[0] 2.00/2.20/6.00, report 6.40/-/-")
