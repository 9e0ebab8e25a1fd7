"""kill -9 while ``claim_table`` takes a failed attempt's rows back out (the withdraw runs inside
the claim task): the kill rolls the whole withdraw back, and the re-run of the corrected input
loads every row exactly once."""

from __future__ import annotations

from typing import Any

from benchmarks.summary import parse_report_line
from tests.e2e.example_load import ExampleLoad

DS0 = "2026-11-20"
DS = "2026-11-21"
HEADER = b"id,customer_id,quantity,note,created_at\n"
LATE = b"90000001,1,1,fine,2026-01-01 00:00:00\n"
BAD = HEADER + LATE + b"90000002,not-a-number,1,bad,2026-01-01 00:00:00\n"
FIXED = HEADER + LATE + b"90000002,2,1,fixed,2026-01-01 00:00:00\n"


def count(example: ExampleLoad) -> int:
    return int(example.query("SELECT count(*) FROM events")[0][0])


def claims(example: ExampleLoad) -> list[tuple[Any, ...]]:
    return example.query("SELECT table_name, load_id FROM bulkload.table_claims")


def assert_loaded_once(example: ExampleLoad, before: dict[str, Any]) -> None:
    """``ExampleLoad.assert_loaded_once``, except that the failed attempt's superseded manifest
    stays in the bucket: each ledger chunk once, and the ledger holds exactly the chunks of the
    manifests it draws from."""
    from airflow_bulkload.staging.manifest import ChunkSpec

    assert example.loaded_checksum() == example.expected_checksum()
    # server settings are shared with whatever else runs on the server: the table only
    assert example.snapshot()["table"] == before["table"]
    ledger = example.ledger()
    assert all(n == 1 for _, n in ledger), ledger
    keys = {key for key, _ in ledger}
    manifests = [{ChunkSpec.from_dict(c).key for c in m["chunks"]} for m in example.manifests()]
    used = [m for m in manifests if m & keys]
    assert all(m <= keys for m in used), "a manifest's chunks are only partly in the ledger"
    assert set().union(*used) == keys
    assert example.leases() == []


def test_a_kill_while_claim_table_withdraws_is_finished_by_the_rerun(
    pg_example: ExampleLoad,
) -> None:
    """One date loads (so restore cannot simply empty the table); the next fails on a bad row
    after other chunks committed; the file is corrected and the re-run is killed once the
    withdraw has deleted rows (its transaction holds a row-exclusive lock on the table): every
    chunk is rolled back, none half taken out; the next re-run ends green with every row once."""
    pg_example.files = 6
    pg_example.add_input(DS0, id_offset=1_000_000)
    before = pg_example.snapshot()
    assert pg_example.run(DS0).succeeded
    base = count(pg_example)
    pg_example.add_input(DS)
    pg_example.put_input_object(DS, "zz-late.csv", BAD)
    failed = pg_example.run(DS)
    assert not failed.succeeded, failed.tail()
    committed = count(pg_example)
    assert committed > base, "the failed run should leave committed chunks to take back"
    fixed = pg_example.workdir / DS / "zz-late.csv"
    fixed.write_bytes(FIXED)
    pg_example.put_input_object(DS, "zz-late.csv", FIXED)
    pg_example.dates[DS].append(fixed)

    deleting = (
        "SELECT count(*) > 0 FROM pg_locks WHERE relation = 'public.events'::regclass"
        " AND mode = 'RowExclusiveLock' AND granted AND pid <> pg_backend_pid()"
    )
    killed = pg_example.run(DS, during="claim_table", when_sql=deleting)
    assert killed.killed, killed.tail()
    assert count(pg_example) == committed  # killed with the withdraw under way: rolled back

    rerun = pg_example.run(DS)
    assert rerun.succeeded, rerun.tail()
    assert_loaded_once(pg_example, before)
    assert claims(pg_example) == []
    assert pg_example.query("SELECT count(*) = count(DISTINCT id) FROM events") == [(True,)]
    report = parse_report_line(rerun.output)
    assert report is not None and report["verification"]["verified"], report
