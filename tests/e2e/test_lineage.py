"""OpenLineage events of a real run of the example DAG (the ``openlineage`` extra installed).

The run writes its events to a file (OpenLineage's file transport); the load tasks' COMPLETE
events must name the S3 objects read and the table written, with the table's schema and the rows
and bytes that are in it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.summary import parse_report_line
from tests.e2e.example_load import ExampleLoad

DS = "2026-11-21"


def _complete_events(path: Path, task: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        e
        for e in events
        if e.get("eventType") == "COMPLETE" and e["job"]["name"].endswith(f".{task}")
    ]


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_the_load_tasks_emit_the_s3_input_and_the_table_with_schema_and_counts(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    example: ExampleLoad = request.getfixturevalue(
        f"{'pg' if engine == 'postgres' else engine}_example"
    )
    example.add_input(DS)
    events_file = tmp_path / "openlineage.jsonl"
    transport = {"type": "file", "log_file_path": str(events_file), "append": True}
    run = example.run(DS, env={"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport)})
    assert run.succeeded, run.tail()
    report = parse_report_line(run.output)
    assert report is not None

    database = example.db.name
    if engine == "postgres":
        namespace, name = "postgres://127.0.0.1:5432", f"{database}.public.events"
    else:
        namespace, name = "mysql://127.0.0.1:3306", f"{database}.events"
    expected_fields = ["id", "customer_id", "quantity", "note", "created_at"]

    # one event per load task, which loads a batch of chunks: each chunk's object is an input
    loads = _complete_events(events_file, "load")
    assert 1 <= len(loads) <= report["chunks"], [e["job"]["name"] for e in loads]
    rows = nbytes = 0
    sources = []
    for event in loads:
        [output] = event["outputs"]
        assert (output["namespace"], output["name"]) == (namespace, name)
        assert [f["name"] for f in output["facets"]["schema"]["fields"]] == expected_fields
        stats = output["outputFacets"]["outputStatistics"]
        rows, nbytes = rows + stats["rowCount"], nbytes + stats["size"]
        assert event["inputs"]
        for source in event["inputs"]:
            assert source["namespace"].startswith("s3://")
            assert source["name"]
            sources.append((source["namespace"], source["name"]))
    assert (rows, nbytes) == (report["rows"], report["bytes"]) and rows == example.rows
    # every chunk (one object each here) is an input of exactly one load task's event
    assert len(sources) == len(set(sources)) == report["chunks"]

    [summary] = _complete_events(events_file, "report")
    [output] = summary["outputs"]
    assert (output["namespace"], output["name"]) == (namespace, name)
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == example.rows
    # the whole load's inputs are the source objects the report verified
    assert sorted(i["name"] for i in summary["inputs"]) == sorted(
        f"{example.input_folder}/{DS}/{path.name}" for path in example.dates[DS]
    )
    assert {i["namespace"] for i in summary["inputs"]} == {f"s3://{example.input_bucket}"}
