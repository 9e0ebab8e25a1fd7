"""The example DAGs end to end with ``airflow dags test``: loaded once, restored, restartable."""

from __future__ import annotations

import pytest

from benchmarks.summary import parse_report_line
from tests.e2e.example_load import ExampleLoad

DS = "2026-11-21"


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_example_dag_loads_the_input_once_and_leaves_the_table_as_it_was(
    engine: str, request: pytest.FixtureRequest
) -> None:
    example: ExampleLoad = request.getfixturevalue(
        f"{'pg' if engine == 'postgres' else engine}_example"
    )
    example.add_input(DS)
    before = example.snapshot()

    first = example.run(DS)
    assert first.succeeded, first.tail()
    example.assert_loaded_once(before)
    report = parse_report_line(first.output)
    assert report is not None
    assert (report["rows"], report["chunks_skipped"]) == (example.rows, 0)
    assert report["chunks_loaded"] == len(example.ledger())
    assert report["stage_seconds"]["load"] is not None

    again = example.run(DS)  # a re-run of the same date: every chunk is already in the ledger
    assert again.succeeded, again.tail()
    assert "already loaded" in again.output
    example.assert_loaded_once(before)


PG_INDEXES_BACK = (
    "SELECT count(*) > 0 FROM pg_index WHERE indrelid = 'public.events'::regclass"
    " AND indexrelid::regclass::text <> 'events_pkey'"
)
PG_LEDGER_HAS_4 = (
    "SELECT count(*) >= 4 FROM bulkload.chunk_ledger WHERE table_name = 'public.events'"
)
KILL_POINTS = {
    "after_staging": {"before": "preflight"},
    "after_claim": {"before": "prepare_table"},  # enter_bulk_mode may have run beside it
    "after_prepare": {"before": "load#0"},
    # two load sessions: the six chunks are two load tasks of three (load batches)
    "after_half_the_chunks": {"before": "load#1"},
    # the re-run skips the first task's three, then is killed inside the second task's batch,
    # a chunk after its first committed one: watched from the first load task's start (dags
    # test runs the tasks in one process, so the watch goes on), connected well before then
    "inside_a_batch": {"during": "load#0", "when_sql": PG_LEDGER_HAS_4},
    "during_finalize": {"during": "finalize_table", "when_sql": PG_INDEXES_BACK},
}


def test_a_run_killed_at_every_point_in_turn_is_finished_by_its_reruns(
    pg_example: ExampleLoad,
) -> None:
    """kill -9 at each point in pipeline order, each kill on the re-run of the run killed
    before it, as an operator clearing a run after every crash would meet them; the last re-run
    finishes the load: every row once, indexes, settings and leases as before."""
    # the default loads each gzip object as one chunk: six objects make six chunks
    pg_example.files = 6
    pg_example.add_input(DS)
    before = pg_example.snapshot()

    for point, kill in KILL_POINTS.items():
        killed = pg_example.run(DS, **kill)
        assert killed.killed, f"{point}: {killed.tail()}"
        if point == "after_half_the_chunks":  # no chunk loaded before this point
            assert len(pg_example.ledger()) == 3
        if point == "inside_a_batch":  # killed with the batch part done
            assert 4 <= len(pg_example.ledger()) < 6
    rerun = pg_example.run(DS)

    assert rerun.succeeded, rerun.tail()
    pg_example.assert_loaded_once(before)


def test_a_bad_row_fails_the_run_restores_everything_and_a_corrected_input_loads_once(
    pg_example: ExampleLoad,
) -> None:
    pg_example.add_input(DS)
    header = b"id,customer_id,quantity,note,created_at\n"
    pg_example.put_input_object(
        DS,
        "zz-late.csv",
        header + b"90000001,1,1,fine,2026-01-01 00:00:00\n"
        b"90000002,not-a-number,1,bad,2026-01-01 00:00:00\n",
    )
    before = pg_example.snapshot()

    failed = pg_example.run(DS)
    assert not failed.succeeded
    assert "customer_id" in failed.output  # the error names the column (and chunk and line)
    assert pg_example.snapshot() == before  # teardowns put back the indexes and settings
    assert pg_example.leases() == []
    assert pg_example.query("SELECT count(*) FROM events WHERE id >= 90000000") == [(0,)]

    pg_example.put_input_object(
        DS,
        "zz-late.csv",
        header + b"90000001,1,1,fine,2026-01-01 00:00:00\n90000002,2,1,fixed,2026-01-01 00:00:00\n",
    )
    fixed = pg_example.run(DS)
    assert fixed.succeeded, fixed.tail()
    assert pg_example.snapshot() == before
    rows = pg_example.query("SELECT count(*), count(DISTINCT id) FROM events")[0]
    assert rows == (pg_example.rows + 2, pg_example.rows + 2)


def test_the_table_is_the_truth_across_reruns_other_inputs_and_reload(
    pg_example: ExampleLoad,
) -> None:
    """Issue 18 as a UI user meets it: an emptied table is loaded again by a re-run; another
    ``source`` for a loaded date is refused, and replaces the date only with ``reload``."""
    files = pg_example.add_input(DS)
    before = pg_example.snapshot()
    assert pg_example.run(DS).succeeded

    pg_example.query("TRUNCATE TABLE events")
    again = pg_example.run(DS)
    assert again.succeeded, again.tail()
    assert "the entry is stale" in again.output
    pg_example.assert_loaded_once(before)

    one_file = f"s3://{pg_example.input_bucket}/{pg_example.input_folder}/{DS}/{files[0].name}"
    refused = pg_example.run(DS, conf={"source": one_file})
    assert not refused.succeeded
    assert "InputAlreadyLoadedError" in refused.output
    assert pg_example.loaded_checksum() == pg_example.expected_checksum()  # nothing taken out

    replaced = pg_example.run(DS, conf={"source": one_file, "reload": True})
    assert replaced.succeeded, replaced.tail()
    file_rows = sum(1 for _ in files[0].open()) - 1  # minus the header
    assert pg_example.query("SELECT count(*), count(DISTINCT id) FROM events") == [
        (file_rows, file_rows)
    ]
    assert pg_example.snapshot() == before


def test_an_empty_input_is_reported_not_silent(pg_example: ExampleLoad) -> None:
    """A nightly run over a missing export (header only) ends green, and says so."""
    pg_example.add_input(DS)  # creates the buckets
    s3 = pg_example.moto.client("s3")
    for obj in s3.list_objects_v2(Bucket=pg_example.input_bucket)["Contents"]:
        s3.delete_object(Bucket=pg_example.input_bucket, Key=obj["Key"])
    pg_example.put_input_object(DS, "empty.csv", b"id,customer_id,quantity,note,created_at\n")
    before = pg_example.snapshot()

    run = pg_example.run(DS)

    assert run.succeeded, run.tail()
    assert "0 rows, input empty" in run.output
    assert pg_example.snapshot() == before
