"""Steps the pipeline runs inside a neighbour's task: withdraw in ``claim_table``, CHECKPOINT in
``finalize_table``. Each must do exactly what its own operator does, and hold up to a retry."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_bulkload.exceptions import TableClaimedError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.hooks.table_state import TableStateHook
from airflow_bulkload.operators import ClaimTableOperator, FinalizeTableOperator
from tests.harness import MotoServer, TestDatabase
from tests.integration.hooks.test_withdraw_superseded import (
    create_notes,
    failed_then_corrected,
    loaded_without_record_then_changed,
)


def context() -> dict[str, Any]:
    """What the operators read of a task's context: the DAG id and the run."""
    return {"dag": SimpleNamespace(dag_id="nightly"), "run_id": "scheduled__2026-11-21"}


def claim_step(
    db: TestDatabase, load_id: str, manifest: str | None = None, **more: Any
) -> ClaimTableOperator:
    """The pipeline's ``claim_table`` of ``notes``: with a manifest, it withdraws too."""
    return ClaimTableOperator(
        task_id="claim_table",
        table="notes",
        conn_id=db.conn_id,
        load_id=load_id,
        manifest=manifest,
        **more,
    )


def test_claim_with_the_manifest_takes_back_a_failed_attempts_rows_once(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    committed, second = failed_then_corrected(any_db, moto_server, s3_bucket, tmp_path)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    claim = claim_step(any_db, "tonight", second.manifest_uri, reload="false")  # as a Param
    done = claim.execute(context())  # type: ignore[arg-type]
    assert done["load_id"] == "tonight"
    assert done["withdraw"]["rows"] == committed
    assert any_db.query("SELECT count(*) FROM notes") == [(0,)]
    # a retry of the task (the claim is its own, nothing left to take back) changes nothing
    assert claim.execute(context())["withdraw"]["chunks"] == []  # type: ignore[arg-type]

    # the claim is held: another load waits for it (here: fails at once)
    other = claim_step(any_db, "backfill")
    with pytest.raises(TableClaimedError, match="tonight"):
        other.execute(context())  # type: ignore[arg-type]

    for chunk in second.manifest.chunks:
        hook.load_chunk("notes", chunk)
    ids = [row[0] for row in any_db.query("SELECT id FROM notes ORDER BY id")]
    assert ids == list(range(1, 304))
    TableStateHook(conn_id=any_db.conn_id).restore("notes", load_id="tonight")


def test_a_refused_second_input_fails_the_claim_task_and_the_teardown_releases_it(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Chunks committed with no record of their load may be a complete load of the date:
    another input is refused (without reload). The claim task fails; restore (its teardown)
    releases the claim, and the table keeps what it had."""
    from airflow_bulkload.exceptions import InputAlreadyLoadedError

    second = loaded_without_record_then_changed(pg_db, moto_server, s3_bucket, tmp_path)
    claim = claim_step(pg_db, "tonight", second.manifest_uri)
    with pytest.raises(InputAlreadyLoadedError, match="reload=True"):
        claim.execute(context())  # type: ignore[arg-type]
    TableStateHook(conn_id=pg_db.conn_id).restore("notes", load_id="tonight")
    assert pg_db.query("SELECT count(*) FROM notes") == [(300,)]
    again = claim_step(pg_db, "tomorrow", second.manifest_uri, reload=True)
    assert again.execute(context())["withdraw"]["rows"] == 300  # type: ignore[arg-type]
    assert pg_db.query("SELECT count(*) FROM notes") == [(0,)]
    TableStateHook(conn_id=pg_db.conn_id).restore("notes", load_id="tomorrow")


def indexes(db: TestDatabase) -> set[str]:
    if db.engine == "postgres":
        return {
            r[0] for r in db.query("SELECT indexname FROM pg_indexes WHERE tablename = 'notes'")
        }
    return {r[2] for r in db.query("SHOW INDEX FROM notes")}


def test_finalize_with_checkpoint_checkpoints_once_the_table_is_back(
    any_db: TestDatabase,
) -> None:
    create_notes(any_db)
    any_db.query("CREATE INDEX notes_note ON notes (note)")
    state = TableStateHook(conn_id=any_db.conn_id)
    state.prepare("notes", load_id="tonight", drop_indexes=True, incoming_bytes=10**10)
    any_db.query("INSERT INTO notes VALUES (1, 'one'), (2, 'two')")
    finalize = FinalizeTableOperator(
        task_id="finalize_table",
        table="notes",
        conn_id=any_db.conn_id,
        load_id="tonight",
        checkpoint=True,
    )
    done = finalize.execute(context())  # type: ignore[arg-type]
    expected = "CHECKPOINT" if any_db.engine == "postgres" else "no-op"
    assert str(done["checkpoint"]).startswith(expected)
    assert "notes_note" in indexes(any_db)
    # a retry after a lost connection finds the table done and checkpoints again
    assert str(finalize.execute(context())["checkpoint"]).startswith(expected)  # type: ignore[arg-type]


def test_prepare_given_the_plans_drop_indexes_reads_no_manifest(
    any_db: TestDatabase, moto_server: MotoServer
) -> None:
    """The pipeline hands prepare_table pre-flight's plan (a bool): the input's size, which
    only the automatic index decision weighs, is not read again from S3 (a task's S3 client
    costs tenths of a second on the critical path). Auto still reads it."""
    from airflow_bulkload.operators import PrepareTableOperator

    create_notes(any_db)
    gone = "s3://bl-no-such-bucket/staging/manifest.json"
    common: dict[str, Any] = {"table": "notes", "conn_id": any_db.conn_id, "manifest": gone}
    auto = PrepareTableOperator(
        task_id="prepare_table", load_id="tonight", drop_indexes="auto", **common
    )
    with pytest.raises(Exception, match="the staging bucket 'bl-no-such-bucket' does not exist"):
        auto.execute(context())  # type: ignore[arg-type]
    planned = PrepareTableOperator(
        task_id="prepare_table", load_id="tonight", drop_indexes=True, **common
    )
    assert planned.execute(context())["load_id"] == "tonight"  # type: ignore[arg-type]
    TableStateHook(conn_id=any_db.conn_id).restore("notes", load_id="tonight")
