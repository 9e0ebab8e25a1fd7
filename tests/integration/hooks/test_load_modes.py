"""The replace and upsert modes on real servers: work table, swap, merge, kills and re-runs."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_bulkload.exceptions import LoadModeError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.hooks.load_modes import LoadModesHook
from airflow_bulkload.staging.stager import StageResult
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import stage_checked

LOAD_ID = "modes/items/2026-11-21"


def create_items(db: TestDatabase) -> None:
    if db.engine == "postgres":
        db.query(
            "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, price numeric(10,2),"
            " tags jsonb, CONSTRAINT price_positive CHECK (price >= 0))"
        )
        db.query("CREATE INDEX items_name ON items (name)")
        db.query("CREATE UNIQUE INDEX items_name_price ON items (name, price)")
        db.query("ALTER TABLE items SET (fillfactor = 80)")
        db.query("COMMENT ON TABLE items IS 'the catalogue'")
    else:
        db.query(
            "CREATE TABLE items (id bigint PRIMARY KEY, name varchar(100) NOT NULL,"
            " price decimal(10,2), tags json, KEY items_name (name),"
            " UNIQUE KEY items_name_price (name, price)) COMMENT 'the catalogue'"
        )


def insert_old(db: TestDatabase, first: int, last: int) -> None:
    db.query(
        "INSERT INTO items (id, name, price, tags) VALUES "
        + ", ".join(f"({i}, 'old-{i}', {i}.50, NULL)" for i in range(first, last + 1))
    )


def put_input(moto: MotoServer, bucket: str, first: int, last: int, *, name: str = "new") -> None:
    lines = ["id,name,price,tags"]
    lines += [f'{i},{name}-{i},{i}.25,"{{""n"": {i}}}"' for i in range(first, last + 1)]
    moto.client("s3").put_object(
        Bucket=bucket, Key="in/items.csv", Body=("\n".join(lines) + "\n").encode()
    )


def stage(db: TestDatabase, moto: MotoServer, bucket: str) -> StageResult:
    return stage_checked(db, moto, bucket, "items", chunk_size=2_000)


def load_all(db: TestDatabase, staged: StageResult, mode: str, *, skip_last: bool = False) -> None:
    into = LoadModesHook(conn_id=db.conn_id).load_table("items", mode)
    chunks = staged.manifest.chunks[:-1] if skip_last else staged.manifest.chunks
    for chunk in chunks:
        BulkLoadHook(conn_id=db.conn_id).load_chunk(into, chunk, load_id=LOAD_ID)


def rows(db: TestDatabase) -> dict[int, tuple[Any, ...]]:
    return {r[0]: tuple(map(str, r[1:])) for r in db.query("SELECT id, name, price FROM items")}


def catalog(db: TestDatabase) -> list[tuple[Any, ...]]:
    if db.engine == "postgres":
        return (
            db.query(
                "SELECT indexname, regexp_replace(indexdef, ' ON .* USING', ' USING')"
                " FROM pg_indexes WHERE tablename = 'items' ORDER BY 1"
            )
            + db.query(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE conrelid = 'items'::regclass ORDER BY 1"
            )
            + db.query(
                "SELECT reloptions::text, obj_description('items'::regclass, 'pg_class'),"
                " relacl::text FROM pg_class WHERE oid = 'items'::regclass"
            )
        )
    return db.query(
        "SELECT INDEX_NAME, COLUMN_NAME, SEQ_IN_INDEX, NON_UNIQUE FROM information_schema.STATISTICS"
        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'items' ORDER BY 1, 3"
    ) + db.query(
        "SELECT TABLE_COMMENT FROM information_schema.TABLES"
        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'items'"
    )


def tables(db: TestDatabase) -> list[str]:
    if db.engine == "postgres":
        found = db.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    else:
        found = db.query("SHOW TABLES")
    return sorted(r[0] for r in found if not r[0].startswith("bulkload_"))


def test_replace_swaps_in_the_input_and_keeps_the_definition(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_items(any_db)
    insert_old(any_db, 1, 100)
    if any_db.engine == "postgres":
        any_db.query(
            "DO $$ BEGIN CREATE ROLE bl_reader; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        )
        any_db.query("GRANT SELECT ON items TO bl_reader")
    before = catalog(any_db)
    put_input(moto_server, s3_bucket, 50, 400)
    staged = stage(any_db, moto_server, s3_bucket)
    assert len(staged.manifest.chunks) > 2
    hook = LoadModesHook(conn_id=any_db.conn_id)
    prepared = hook.prepare_work_table(
        "items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri
    )
    assert prepared["work_table"].endswith("items__bl_new")
    load_all(any_db, staged, "replace", skip_last=True)
    # readers see the old rows while the work table fills
    assert len(rows(any_db)) == 100
    # a retry of prepare (a cleared task) keeps the chunks committed so far
    hook.prepare_work_table("items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri)
    load_all(any_db, staged, "replace")
    result = hook.finalize_work_table(
        "items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri
    )
    assert result["published"] == "swapped in"
    after = rows(any_db)
    assert sorted(after) == list(range(50, 401))
    assert after[50] == ("new-50", "50.25")
    assert catalog(any_db) == before
    assert tables(any_db) == ["items"]
    # finalize again (a retry after the swap): nothing changes
    again = hook.finalize_work_table(
        "items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri
    )
    assert again["published"] == "already swapped in"
    verification = hook.verify_load("items", staged.manifest_uri, load_id=LOAD_ID, mode="replace")
    assert verification["verified"] and verification["rows_in_table"] == 351
    hook.restore_work_table("items", mode="replace", load_id=LOAD_ID)
    assert len(rows(any_db)) == 351


def test_replace_that_fails_leaves_the_target_as_it_was(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_items(any_db)
    insert_old(any_db, 1, 100)
    before = (catalog(any_db), rows(any_db))
    put_input(moto_server, s3_bucket, 1, 300)
    staged = stage(any_db, moto_server, s3_bucket)
    hook = LoadModesHook(conn_id=any_db.conn_id)
    hook.prepare_work_table("items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri)
    load_all(any_db, staged, "replace", skip_last=True)
    # the run fails here: the teardown drops the work table
    hook.restore_work_table("items", mode="replace", load_id=LOAD_ID)
    assert (catalog(any_db), rows(any_db)) == before
    assert tables(any_db) == ["items"]
    # a re-run starts afresh and loads every row exactly once
    hook.prepare_work_table("items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri)
    load_all(any_db, staged, "replace")
    hook.finalize_work_table("items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri)
    assert sorted(rows(any_db)) == list(range(1, 301))


def test_replace_after_the_input_changed_does_not_keep_the_old_input_chunks(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_items(any_db)
    put_input(moto_server, s3_bucket, 1, 300)
    first = stage(any_db, moto_server, s3_bucket)
    hook = LoadModesHook(conn_id=any_db.conn_id)
    hook.prepare_work_table("items", mode="replace", load_id=LOAD_ID, manifest=first.manifest_uri)
    load_all(any_db, first, "replace")
    # killed before finalize and its teardown; the input is corrected and the run cleared
    put_input(moto_server, s3_bucket, 1, 120, name="fixed")
    second = stage(any_db, moto_server, s3_bucket)
    hook.prepare_work_table("items", mode="replace", load_id=LOAD_ID, manifest=second.manifest_uri)
    load_all(any_db, second, "replace")
    hook.finalize_work_table("items", mode="replace", load_id=LOAD_ID, manifest=second.manifest_uri)
    after = rows(any_db)
    assert sorted(after) == list(range(1, 121)) and after[7][0] == "fixed-7"


def test_upsert_updates_and_inserts_exactly_under_a_retry(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_items(any_db)
    insert_old(any_db, 1, 100)
    put_input(moto_server, s3_bucket, 50, 400)
    staged = stage(any_db, moto_server, s3_bucket)
    hook = LoadModesHook(conn_id=any_db.conn_id)
    hook.prepare_work_table("items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri)
    load_all(any_db, staged, "upsert")
    assert len(rows(any_db)) == 100  # nothing merged yet

    # the worker dies after the first merge batch committed
    monkeypatch.setattr("airflow_bulkload.hooks.load_modes.MERGE_BATCH_ROWS", 60)
    dialect = hook.dialect
    real = type(dialect).merge_batches

    def die_after_one(self: Any, *args: Any, **kwargs: Any) -> Any:
        batches = real(self, *args, **kwargs)
        yield next(batches)
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(type(dialect), "merge_batches", die_after_one)
    with pytest.raises(KeyboardInterrupt):
        hook.finalize_work_table(
            "items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri
        )
    monkeypatch.setattr(type(dialect), "merge_batches", real)
    result = hook.finalize_work_table(
        "items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri
    )
    assert result["published"] == "merged"
    after = rows(any_db)
    assert sorted(after) == list(range(1, 401))
    assert after[1] == ("old-1", "1.50") and after[49] == ("old-49", "49.50")
    assert after[50] == ("new-50", "50.25") and after[400] == ("new-400", "400.25")
    assert tables(any_db) == ["items"]
    verification = hook.verify_load("items", staged.manifest_uri, load_id=LOAD_ID, mode="upsert")
    assert verification["verified"]
    again = hook.finalize_work_table(
        "items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri
    )
    assert again["published"] == "already merged" and rows(any_db) == after


def test_upsert_refuses_an_input_holding_a_key_twice(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_items(any_db)
    insert_old(any_db, 1, 10)
    body = "id,name,price,tags\n5,a,1.00,\n6,b,2.00,\n5,c,3.00,\n"
    moto_server.client("s3").put_object(Bucket=s3_bucket, Key="in/items.csv", Body=body.encode())
    staged = stage(any_db, moto_server, s3_bucket)
    hook = LoadModesHook(conn_id=any_db.conn_id)
    hook.prepare_work_table("items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri)
    into = hook.load_table("items", "upsert")
    try:
        for chunk in staged.manifest.chunks:
            BulkLoadHook(conn_id=any_db.conn_id).load_chunk(into, chunk, load_id=LOAD_ID)
        with pytest.raises(LoadModeError, match=r"\(id\)=\(5\) x2"):
            hook.finalize_work_table(
                "items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri
            )
    except Exception as exc:  # MySQL's work table keeps the primary key: the load itself refuses
        assert any_db.engine == "mysql" and "Duplicate" in str(exc), exc
    hook.restore_work_table("items", mode="upsert", load_id=LOAD_ID)
    assert rows(any_db)[5] == ("old-5", "5.50") and tables(any_db) == ["items"]


def test_modes_refuse_tables_they_cannot_load_as_promised(any_db: TestDatabase) -> None:
    create_items(any_db)
    any_db.query("CREATE TABLE notes (id int PRIMARY KEY, item_id bigint REFERENCES items (id))")
    any_db.query("CREATE TABLE keyless (a int, b text)")
    hook = LoadModesHook(conn_id=any_db.conn_id)
    with pytest.raises(LoadModeError, match="foreign keys"):
        hook.check_mode("items", "replace", None)
    with pytest.raises(LoadModeError, match="no primary key"):
        hook.check_mode("keyless", "upsert", None)
    with pytest.raises(LoadModeError, match="no unique"):
        hook.check_mode("items", "upsert", ["name"])
    with pytest.raises(LoadModeError, match="allows NULL"):
        hook.check_mode("items", "upsert", ["price", "name"])
    if any_db.engine == "postgres":
        any_db.query("ALTER TABLE items ALTER price SET NOT NULL")
    else:
        any_db.query("ALTER TABLE items MODIFY price decimal(10,2) NOT NULL")
    hook.check_mode("items", "upsert", ["price", "name"])  # the unique (name, price) key
    if any_db.engine == "postgres":
        any_db.query("CREATE VIEW cheap AS SELECT * FROM keyless WHERE a < 10")
        with pytest.raises(LoadModeError, match=r"views that read it .*: cheap"):
            hook.check_mode("keyless", "replace", None)


def test_a_user_table_with_a_work_table_name_is_never_dropped(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_items(any_db)
    any_db.query("CREATE TABLE items__bl_new (precious int)")
    any_db.query("INSERT INTO items__bl_new VALUES (1)")
    put_input(moto_server, s3_bucket, 1, 10)
    staged = stage(any_db, moto_server, s3_bucket)
    hook = LoadModesHook(conn_id=any_db.conn_id)
    with pytest.raises(LoadModeError, match="not a work table of airflow_bulkload"):
        hook.prepare_work_table(
            "items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri
        )
    hook.restore_work_table("items", mode="replace", load_id=LOAD_ID)
    assert any_db.query("SELECT precious FROM items__bl_new") == [(1,)]


def test_an_upsert_input_without_a_required_column_is_refused_before_anything_changes(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_items(any_db)
    insert_old(any_db, 1, 10)
    body = "id,price\n1,9.99\n2,8.88\n"
    moto_server.client("s3").put_object(Bucket=s3_bucket, Key="in/items.csv", Body=body.encode())
    staged = stage(any_db, moto_server, s3_bucket)
    hook = LoadModesHook(conn_id=any_db.conn_id)
    with pytest.raises(LoadModeError, match=r"lacks column\(s\) \['name'\]"):
        hook.prepare_work_table(
            "items", mode="upsert", load_id=LOAD_ID, manifest=staged.manifest_uri
        )
    hook.restore_work_table("items", mode="upsert", load_id=LOAD_ID)
    assert rows(any_db)[1] == ("old-1", "1.50") and tables(any_db) == ["items"]


@pytest.mark.parametrize("direct", [False, True], ids=["staged", "direct"])
def test_a_replace_over_a_header_only_input_keeps_the_old_rows(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, direct: bool
) -> None:
    """A nightly export that came out header-only: as stored it is a chunk of no rows, so the
    manifest is not empty. Finalize counts the rows the work table holds and refuses the swap."""
    create_items(pg_db)
    insert_old(pg_db, 1, 100)
    before = (catalog(pg_db), rows(pg_db))
    moto_server.client("s3").put_object(
        Bucket=s3_bucket, Key="in/items.csv", Body=b"id,name,price,tags\n"
    )
    staged = stage_checked(pg_db, moto_server, s3_bucket, "items", direct=direct)
    assert len(staged.manifest.chunks) == (1 if direct else 0)
    hook = LoadModesHook(conn_id=pg_db.conn_id)
    hook.prepare_work_table("items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri)
    load_all(pg_db, staged, "replace")
    with pytest.raises(LoadModeError, match="the input is empty"):
        hook.finalize_work_table(
            "items", mode="replace", load_id=LOAD_ID, manifest=staged.manifest_uri
        )
    hook.restore_work_table("items", mode="replace", load_id=LOAD_ID)
    assert (catalog(pg_db), rows(pg_db)) == before
    assert tables(pg_db) == ["items"]
