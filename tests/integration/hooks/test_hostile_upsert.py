"""Hostile tests of mode="upsert" at hook level: each asserts the promised behaviour.

The promise (docs/modes.md): updates and inserts exact, exactly once under retries and kills
anywhere; only the input's columns are written; a failed run leaves the target as it was (or
fully merged); an input holding a key twice is refused before merging; a green verification
never stands over missing or wrong rows.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_bulkload.exceptions import LoadModeError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.hooks.load_modes import LoadModesHook
from airflow_bulkload.staging.stager import StageResult
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import stage_checked

LOAD_ID = "hostile/items/2026-11-21"


def put(moto: MotoServer, bucket: str, body: str, key: str = "in/items.csv") -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body.encode())


def stage(
    db: TestDatabase, moto: MotoServer, bucket: str, table: str = "items", **options: Any
) -> StageResult:
    return stage_checked(db, moto, bucket, table, **({"chunk_size": 2_000} | options))


def upsert(
    db: TestDatabase,
    staged: StageResult,
    table: str = "items",
    *,
    keys: list[str] | None = None,
    load_id: str = LOAD_ID,
    finalize: bool = True,
) -> dict[str, Any] | None:
    """prepare, load every chunk, finalize (as the pipeline's tasks do, in order)."""
    hook = LoadModesHook(conn_id=db.conn_id)
    hook.prepare_work_table(
        table, mode="upsert", load_id=load_id, manifest=staged.manifest_uri, upsert_keys=keys
    )
    into = hook.load_table(table, "upsert")
    for chunk in staged.manifest.chunks:
        BulkLoadHook(conn_id=db.conn_id).load_chunk(into, chunk, load_id=load_id)
    if not finalize:
        return None
    return hook.finalize_work_table(
        table, mode="upsert", load_id=load_id, manifest=staged.manifest_uri, upsert_keys=keys
    )


def work_tables(db: TestDatabase) -> list[str]:
    if db.engine == "postgres":
        found = db.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    else:
        found = db.query("SHOW TABLES")
    return sorted(r[0] for r in found if r[0].endswith("__bl_upsert"))


def create_items(db: TestDatabase) -> None:
    if db.engine == "postgres":
        db.query(
            "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, price numeric(10,2))"
        )
    else:
        db.query(
            "CREATE TABLE items (id bigint PRIMARY KEY, name varchar(100) NOT NULL,"
            " price decimal(10,2))"
        )


def items_csv(first: int, last: int, name: str = "new") -> str:
    return "id,name,price\n" + "".join(f"{i},{name}-{i},{i}.25\n" for i in range(first, last + 1))


def items(db: TestDatabase) -> dict[int, tuple[str, str]]:
    return {
        int(r[0]): (str(r[1]), str(r[2])) for r in db.query("SELECT id, name, price FROM items")
    }


def test_a_merge_that_fails_in_a_later_batch_does_not_leave_the_target_half_merged(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row the target refuses (a foreign key to a missing parent: work tables carry no
    foreign keys) sits in the last merge batch. The earlier batches committed; finalize fails;
    the teardown drops the work table. The target keeps the earlier batches' updates and
    inserts for good: neither "as it was" nor "fully merged", and nothing merges it again."""
    db = any_db
    db.query("CREATE TABLE parents (id int PRIMARY KEY)")
    db.query("INSERT INTO parents VALUES (1)")
    if db.engine == "postgres":
        db.query(
            "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL,"
            " price numeric(10,2), parent int REFERENCES parents (id))"
        )
    else:
        db.query(
            "CREATE TABLE items (id bigint PRIMARY KEY, name varchar(100) NOT NULL,"
            " price decimal(10,2), parent int, FOREIGN KEY (parent) REFERENCES parents (id))"
        )
    db.query(
        "INSERT INTO items VALUES " + ", ".join(f"({i}, 'old-{i}', 0, 1)" for i in range(1, 101))
    )
    before = items(db)
    body = "id,name,price,parent\n" + "".join(
        f"{i},new-{i},{i}.25,{1 if i < 400 else 2}\n" for i in range(1, 401)
    )
    put(moto_server, s3_bucket, body)
    staged = stage(db, moto_server, s3_bucket)
    monkeypatch.setattr("airflow_bulkload.hooks.load_modes.MERGE_BATCH_ROWS", 50)
    with pytest.raises(Exception, match=r"(?i)foreign key"):
        upsert(db, staged)
    # the run failed: the teardown runs
    LoadModesHook(conn_id=db.conn_id).restore_work_table("items", mode="upsert", load_id=LOAD_ID)
    after = items(db)
    assert after == before, (
        f"a failed upsert left {len(after) - len(before)} inserted rows and "
        f"{sum(after[i] != before[i] for i in before)} updated rows behind"
    )


@pytest.mark.xfail(
    strict=True,
    reason="known limit: an upsert input must carry every NOT NULL column without a default "
    "(refused before anything changes, naming the columns; docs/modes.md)",
)
def test_an_update_only_input_without_a_not_null_column_updates_the_rows(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """A change feed of (id, price) for rows that all exist; ``name`` is NOT NULL without a
    default. "A column the input lacks keeps its value on an updated row": the price changes,
    the name stays. What happens: the work table copies the NOT NULL, so the chunk load into
    it fails (PostgreSQL: null value in column "name" of relation "items__bl_upsert"; MySQL:
    Field 'name' doesn't have a default value), although no row would be inserted."""
    create_items(any_db)
    any_db.query(
        "INSERT INTO items VALUES " + ", ".join(f"({i}, 'old-{i}', 0)" for i in range(1, 11))
    )
    put(moto_server, s3_bucket, "id,price\n1,9.99\n2,8.88\n")
    staged = stage(any_db, moto_server, s3_bucket)
    assert staged.manifest.chunks[0].columns == ["id", "price"]
    result = upsert(any_db, staged)
    assert result is not None and result["published"] == "merged"
    after = items(any_db)
    assert after[1] == ("old-1", "9.99") and after[2] == ("old-2", "8.88")
    assert after[3] == ("old-3", "0.00")
    assert work_tables(any_db) == []


def test_mysql_header_naming_a_column_in_another_case_is_merged_or_refused(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """MySQL column names are case-insensitive: a header ``id,NAME,price`` loads into ``name``
    (an append writes it; the work table gets it). The merge picks the columns to write by
    exact name (``merge_columns``: "NAME" is not "name"), so ``name`` is left out of the
    INSERT and the UPDATE, and the check compares only ``price``: the updated row keeps its
    old name, the new row gets NULL, and the upsert is recorded verified (a green report)."""
    db = mysql_db
    db.query("CREATE TABLE items (id bigint PRIMARY KEY, name varchar(100), price decimal(10,2))")
    db.query("INSERT INTO items VALUES (1, 'old-1', 1), (2, 'old-2', 2)")
    put(moto_server, s3_bucket, "id,NAME,price\n1,new-1,9.99\n11,new-11,1.00\n")
    staged = stage(db, moto_server, s3_bucket)
    hook = LoadModesHook(conn_id=db.conn_id)
    try:
        upsert(db, staged)
    except Exception:  # refusing the header is fine, as long as nothing changed
        assert items(db) == {1: ("old-1", "1.00"), 2: ("old-2", "2.00")}
        return
    verified = hook.verify_load("items", staged.manifest_uri, load_id=LOAD_ID, mode="upsert")
    assert verified["verified"]
    after = items(db)
    assert after[1] == ("new-1", "9.99"), f"green, but row 1 is {after[1]}"
    assert after[11] == ("new-11", "1.00"), f"green, but row 11 is {after[11]}"


def test_postgres_upsert_key_whose_unique_index_has_another_collation(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """``upsert_keys=["email"]`` names a unique index on ``email COLLATE ci`` (a
    case-insensitive ICU collation) over a column of the default collation: check_mode accepts
    it. ON CONFLICT (email) infers that index and updates the row 'Alice@x' for the input's
    'alice@x'; the check then joins on the column's own collation, finds no 'alice@x', and
    fails: every retry merges again and fails again, the teardown leaves the updated row.
    Either refuse the key up front (nothing changed) or merge and check as the index
    compares."""
    db = pg_db
    db.query(
        "CREATE COLLATION IF NOT EXISTS ci"
        " (provider = icu, locale = 'und-u-ks-level2', deterministic = false)"
    )
    db.query("CREATE TABLE items (id int PRIMARY KEY, email text NOT NULL, v int)")
    db.query("CREATE UNIQUE INDEX items_email ON items (email COLLATE ci)")
    db.query("INSERT INTO items VALUES (1, 'Alice@x', 1)")
    put(moto_server, s3_bucket, "id,email,v\n1,alice@x,2\n")
    staged = stage(db, moto_server, s3_bucket, table="items")
    try:
        upsert(db, staged, keys=["email"])
    except LoadModeError:
        assert db.query("SELECT id, email, v FROM items") == [(1, "Alice@x", 1)]
        return
    assert db.query("SELECT id, v FROM items") == [(1, 2)]
    assert work_tables(db) == []


def test_a_run_kept_out_by_the_claim_does_not_drop_the_running_loads_work_table(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """Run A (2026-11-21) holds the table's claim and has loaded its input into the work
    table. Run B (2026-11-22) of the same DAG finds the table claimed (claim_table times out)
    and fails; its teardown, restore_table (trigger rule all_done, after claim_table),
    calls restore_work_table for load B, which drops ``items__bl_upsert`` whoever filled it,
    and forgets its ledger entries. A's finalize then finds no work table and says "already
    merged": A's input is never merged (its report fails, its rows are lost until a full
    re-run). B held nothing: its teardown must leave A's work table alone."""
    from airflow_bulkload.exceptions import TableClaimedError

    create_items(any_db)
    any_db.query(
        "INSERT INTO items VALUES " + ", ".join(f"({i}, 'old-{i}', 0)" for i in range(1, 11))
    )
    put(moto_server, s3_bucket, items_csv(1, 300))
    staged = stage(any_db, moto_server, s3_bucket)
    hook = LoadModesHook(conn_id=any_db.conn_id)
    load_a, load_b = "hostile/items/2026-11-21", "hostile/items/2026-11-22"
    hook.claim("items", load_id=load_a)  # A's claim_table
    upsert(any_db, staged, load_id=load_a, finalize=False)  # A's prepare_table and loads
    # B: claim_table fails, then its teardown runs
    with pytest.raises(TableClaimedError):
        hook.claim("items", load_id=load_b)
    hook.restore_work_table("items", mode="upsert", load_id=load_b)
    assert work_tables(any_db) == ["items__bl_upsert"], "B's teardown dropped A's work table"
    # A goes on: finalize merges its input
    result = hook.finalize_work_table(
        "items", mode="upsert", load_id=load_a, manifest=staged.manifest_uri
    )
    assert result["published"] == "merged"
    assert sorted(items(any_db)) == list(range(1, 301))


def test_a_merge_killed_between_batches_then_torn_down_is_not_left_half_merged(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 of the worker after a merge batch committed. finalize_table has no
    retries (bulk_load_table gives it none), so the scheduler fails it and the teardown,
    restore_table, drops the work table: the target keeps one batch of the input for good.
    docs/modes.md: "a failed run leaves the old rows (a merge cut short is merged again)"."""
    create_items(any_db)
    any_db.query(
        "INSERT INTO items VALUES " + ", ".join(f"({i}, 'old-{i}', 0)" for i in range(1, 101))
    )
    before = items(any_db)
    put(moto_server, s3_bucket, items_csv(50, 400))
    staged = stage(any_db, moto_server, s3_bucket)
    upsert(any_db, staged, finalize=False)
    hook = LoadModesHook(conn_id=any_db.conn_id)
    monkeypatch.setattr("airflow_bulkload.hooks.load_modes.MERGE_BATCH_ROWS", 60)
    real = type(hook.dialect).merge_batches

    def killed_in_the_second(self: Any, *args: Any, **kwargs: Any) -> Any:
        # PostgreSQL commits a batch when the next one is asked for: two batches asked for
        # means the first is committed on both engines
        batches = real(self, *args, **kwargs)
        yield next(batches)
        yield next(batches)
        raise KeyboardInterrupt("kill -9")

    monkeypatch.setattr(type(hook.dialect), "merge_batches", killed_in_the_second)
    with pytest.raises(KeyboardInterrupt):
        hook.finalize_work_table(
            "items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri
        )
    monkeypatch.setattr(type(hook.dialect), "merge_batches", real)
    # the task is failed (no retries); the teardown runs
    hook.restore_work_table("items", mode="upsert", load_id=LOAD_ID)
    after = items(any_db)
    merged = sorted(i for i in after if after[i] != before.get(i))
    assert after == before or merged == list(range(50, 401)), (
        f"the target holds {len(merged)} of the input's 351 rows (ids {merged[0]}..{merged[-1]})"
    )


def test_postgres_check_mode_refuses_a_deferrable_key(pg_db: TestDatabase) -> None:
    """ON CONFLICT cannot use a deferrable unique constraint as its arbiter. check_mode (run by
    preflight and prepare) accepts a DEFERRABLE primary key, so the run stages and loads the
    whole input, and only finalize fails ("ON CONFLICT does not support deferrable unique
    constraints/exclusion constraints as arbiters")."""
    pg_db.query("CREATE TABLE items (id int PRIMARY KEY DEFERRABLE, v int)")
    with pytest.raises(LoadModeError):
        LoadModesHook(conn_id=pg_db.conn_id).check_mode("items", "upsert", None)
