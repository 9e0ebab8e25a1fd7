from __future__ import annotations

from airflow_bulkload.operators.report import markdown_report, stage_seconds, summarize


def test_stage_seconds_spans_first_start_to_last_end() -> None:
    assert stage_seconds([10.0, 11.0, None], [12.5, 14.0]) == 4.0
    assert stage_seconds([], [1.0]) is None
    assert stage_seconds([1.0], [None]) is None


def test_summary_totals_chunks_and_rates() -> None:
    results = [
        {"uri": "s3://b/p/chunk-00000.csv.gz", "rows": 100, "bytes": 1000, "seconds": 1.0},
        {"uri": "s3://b/p/chunk-00001.csv.gz", "rows": 50, "bytes": 500, "skipped": True},
    ]
    summary = summarize("public.t", results, {"stage": 2.0, "load": 3.0, "checkpoint": None})
    assert summary["rows"] == 150
    assert summary["bytes"] == 1500
    assert (summary["chunks"], summary["chunks_loaded"], summary["chunks_skipped"]) == (2, 1, 1)
    assert summary["rows_per_second"] == 50.0
    assert summary["total_seconds"] == 5.0
    text = markdown_report(summary, results)
    assert "| chunk-00001.csv.gz | 50 |" in text
    assert "| checkpoint | - |" in text
