"""Hostile tests of the replace / upsert fixes, round 2 (hook level, real servers).

Each test asserts the promised behaviour (docs/modes.md) and fails on the code as written
(commit a8186aa).
"""

from __future__ import annotations

import pytest

from airflow_bulkload.exceptions import LoadModeError, LoadVerificationError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.hooks.load_modes import LoadModesHook
from tests.harness import MotoServer, TestDatabase
from tests.integration.hooks.test_hostile_upsert import (
    LOAD_ID,
    create_items,
    items,
    items_csv,
    put,
    stage,
    upsert,
)


def test_upsert_rerun_whose_work_table_the_teardown_dropped_is_not_already_merged(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """A date's upsert merged input X (its load record: verified). Later loads changed rows
    1..5. The date is run again (to repair it): prepare makes a fresh work table, a load task
    fails, the teardown drops the work table; the user clears finalize_table and report.
    Finalize finds no work table and a verified record of the *first* run for this staging
    prefix, so it says "already merged"; verify_load(mode="upsert") says verified; rows 1..5
    do not hold the input. A replace in the same spot checks the target holds the input;
    an upsert must not trust a record older than this run's work table."""
    db = any_db
    create_items(db)
    put(moto_server, s3_bucket, items_csv(1, 10))
    staged = stage(db, moto_server, s3_bucket)
    upsert(db, staged)
    db.query("UPDATE items SET name = 'later' WHERE id <= 5")  # a later day's change
    hook = LoadModesHook(conn_id=db.conn_id)
    # the re-run: prepare, a load fails, the teardown runs; then finalize is cleared
    hook.prepare_work_table("items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri)
    hook.restore_work_table("items", mode="upsert", load_id=LOAD_ID)
    try:
        result = hook.finalize_work_table(
            "items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri
        )
        verification = hook.verify_load(
            "items", staged.manifest_uri, load_id=LOAD_ID, mode="upsert"
        )
    except (LoadModeError, LoadVerificationError):
        return  # refusing is right: nothing was merged by this run
    after = items(db)
    assert all(after[i][0] == f"new-{i}" for i in range(1, 11)), (
        f"finalize said {result['published']!r} and the report verified={verification['verified']}, "
        f"but rows 1..5 hold {[after[i][0] for i in range(1, 6)]}"
    )


def test_a_work_table_dropped_by_hand_is_not_taken_as_swapped_in(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """A replace loaded its input into items__bl_new and the worker was killed before
    finalize (no teardown). A DBA drops the leftover work table. The finalize retry finds no
    work table, takes the work table's remaining ledger entries for "a swap cut short after
    its rename" (_finish_swap, also on PostgreSQL, whose swap is one transaction), moves them
    onto the target (forgetting the target's own) and answers "already swapped in"; the
    report verifies it (the old snapshot holds the same keys). The table still holds the
    old rows: 'A work table that is gone counts as swapped in only when the target holds
    every chunk of this input'."""
    db = any_db
    db.query("CREATE TABLE items (id int PRIMARY KEY, name varchar(40))")
    db.query("INSERT INTO items VALUES " + ", ".join(f"({i}, 'old')" for i in range(1, 101)))
    put(moto_server, s3_bucket, "id,name\n" + "".join(f"{i},new\n" for i in range(1, 101)))
    staged = stage(db, moto_server, s3_bucket)
    hook = LoadModesHook(conn_id=db.conn_id)
    hook.prepare_work_table("items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri)
    into = hook.load_table("items", "replace")
    for chunk in staged.manifest.chunks:
        BulkLoadHook(conn_id=db.conn_id).load_chunk(into, chunk, load_id=LOAD_ID)
    db.query("DROP TABLE items__bl_new")  # killed before finalize; the leftover dropped by hand
    try:
        result = hook.finalize_work_table(
            "items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri
        )
        verification = hook.verify_load(
            "items", staged.manifest_uri, load_id=LOAD_ID, mode="replace"
        )
    except (LoadModeError, LoadVerificationError):
        assert db.query("SELECT name, count(*) FROM items GROUP BY name") == [("old", 100)]
        return
    found = db.query("SELECT name, count(*) FROM items GROUP BY name")
    assert found == [("new", 100)], (
        f"finalize said {result['published']!r} and the report verified="
        f"{verification['verified']}, but the table holds {found}"
    )


@pytest.mark.parametrize("header", ["id,NAME", "id,Name"])
def test_postgres_input_lacking_a_required_column_in_another_case_is_refused_up_front(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, header: str
) -> None:
    """PostgreSQL table with ``name`` (NOT NULL, no default) and ``"NAME"`` (nullable). A
    header ``id,NAME`` carries ``NAME``, not ``name``; ``id,Name`` names neither exactly and
    both in another case (ambiguous). docs/modes.md: the input must carry each NOT NULL column
    without a default, "refused up front otherwise, naming them". _check_required_columns
    compares case-folded names, so prepare accepts both; the whole input is staged and the
    chunk load then fails into the work table (null value in column "name" / column "Name"
    does not exist)."""
    db = pg_db
    db.query('CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, "NAME" text)')
    db.query("INSERT INTO items VALUES (1, 'a', 'A')")
    put(moto_server, s3_bucket, header + "\n1,x\n2,y\n")
    staged = stage(db, moto_server, s3_bucket)
    hook = LoadModesHook(conn_id=db.conn_id)
    try:
        with pytest.raises(LoadModeError, match=r"lacks column\(s\) \['name'\]"):
            hook.prepare_work_table(
                "items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri
            )
    finally:
        hook.restore_work_table("items", mode="upsert", load_id=LOAD_ID)
    assert db.query("SELECT * FROM items") == [(1, "a", "A")]
