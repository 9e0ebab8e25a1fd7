"""Hostile regression tests for mapped staging (staging in groups, one task each).

Each test is what a DAG author did, through the calls the pipeline makes: ``stage`` with
``group_bytes`` (the plan task), ``stage_group`` per group (the mapped ``stage_group`` tasks),
``collect_groups`` (``collect_staging``), then ``reconcile`` (``withdraw_superseded``), one
``load_chunk`` per chunk and ``verify_load`` (the report). A test FAILS on the code as it was
when written and passes once the break is fixed.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from typing import Any

import pytest

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.operators import LoadChunkOperator
from airflow_bulkload.staging.groups import collect_groups, stage_group
from airflow_bulkload.staging.manifest import FileFormat, Manifest
from airflow_bulkload.staging.stager import Resources, StagingOptions, stage
from tests.harness import MotoServer, TestDatabase, put_chunk


@dataclass
class Staged:
    manifest_uri: str
    manifest: Manifest
    groups: int


def put(s3: Any, bucket: str, key: str, text: str) -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=text.encode())


def notes(first: int, last: int, header: str | None = "id,note") -> str:
    return (f"{header}\n" if header else "") + "".join(
        f"{i},note {i}\n" for i in range(first, last + 1)
    )


def stage_groups(
    s3: Any,
    bucket: str,
    source: str,
    *,
    run: str = "2026-11-21",
    group_bytes: int = 1,
    resources: Resources | None = None,
    **options: Any,
) -> Any:
    """What the pipeline's stage -> stage_group x N does; returns the plan (``StagingPlan``)."""
    defaults: dict[str, Any] = {
        "file_format": FileFormat(header=True),
        "chunk_size": 1000,
        "probe_key": ["id"],
    }
    plan = stage(
        source,
        s3=s3,
        staging_uri=f"s3://{bucket}/staging",
        dag_id="nightly",
        table="notes",
        run=run,
        options=StagingOptions(**(defaults | options)),
        resources=resources,
        group_bytes=group_bytes,
    )
    for group in plan.groups:
        stage_group(group.to_dict(), s3=s3, resources=resources)
    return plan


def stage_grouped(s3: Any, bucket: str, source: str, **arguments: Any) -> Staged:
    """What the pipeline's stage -> stage_group x N -> collect_staging does."""
    plan = stage_groups(s3, bucket, source, **arguments)
    if plan.manifest is not None:
        return Staged(plan.manifest_uri, plan.manifest, 0)
    manifest = collect_groups([g.to_dict() for g in plan.groups], s3=s3)
    return Staged(plan.manifest_uri, manifest, len(plan.groups))


def load(hook: BulkLoadHook, staged: Staged, *, reload: bool = False, verify: bool = True) -> None:
    hook.reconcile("notes", staged.manifest_uri, reload=reload, load_id="test/run")
    for chunk in staged.manifest.chunks:
        hook.load_chunk("notes", chunk, load_id="test/run")
    if verify:
        hook.verify_load("notes", staged.manifest_uri, load_id="test/run")


def create_notes(db: TestDatabase, *, key: bool = True) -> None:
    text = "text" if db.engine == "postgres" else "VARCHAR(100)"
    db.query(f"CREATE TABLE notes (id int{' PRIMARY KEY' if key else ''} NOT NULL, note {text})")


def test_a_corrected_input_after_a_failed_grouped_load_takes_back_the_failed_rows(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: a nightly input of three files, staged in groups (it is large); the
    third file holds a bad row, so its chunk failed after the first two files' chunks had
    committed. The user fixed the third file and cleared the run (the pipeline's documented
    recovery: "a failed load's chunks are taken back out when its input is corrected").

    What happened: ``withdraw_superseded`` looks up the failed attempt's load record under each
    superseded chunk's directory, which for grouped staging is ``<fingerprint>/group-NNNNN/``,
    not the input's prefix the record is kept under; it finds none and refuses with
    InputAlreadyLoadedError ("no record of whether that load completed ... run again with
    reload=True"). The date cannot be recovered without reload.

    What should happen: as for an input staged in one task: the failed attempt's committed rows
    are taken back out and the corrected input loads, every id once.
    """
    create_notes(any_db)
    s3 = moto_server.client("s3")
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    put(s3, s3_bucket, "in/part-0.csv", notes(1, 100))
    put(s3, s3_bucket, "in/part-1.csv", notes(101, 200))
    put(s3, s3_bucket, "in/part-2.csv", notes(201, 299) + "three,oops\n")
    first = stage_grouped(s3, s3_bucket, f"s3://{s3_bucket}/in/")
    assert first.groups == 3
    with pytest.raises(ChunkLoadError) as failed:
        load(hook, first, verify=False)
    # the error names the input file and line (a real one), not only the staged chunk
    assert f"s3://{s3_bucket}/in/part-2.csv" in str(failed.value)
    assert failed.value.line == 101
    committed = any_db.query("SELECT count(*) FROM notes")[0][0]
    assert 0 < committed < 300

    put(s3, s3_bucket, "in/part-2.csv", notes(201, 300))  # the fix
    second = stage_grouped(s3, s3_bucket, f"s3://{s3_bucket}/in/")
    load(hook, second)

    assert any_db.query("SELECT count(*), count(DISTINCT id), min(id), max(id) FROM notes") == [
        (300, 300, 1, 300)
    ]


def test_reload_under_another_interval_replaces_a_grouped_input_in_a_keyless_table(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: the nightly run loaded a date's input (staged in groups) into a
    keyless table; an operator then reloaded the date from the UI ("Trigger DAG w/ config",
    reload: true) with a time of day, so the data interval -- and the staging prefix -- differ
    while the files read are the same.

    What happened: ``reload`` looks for "this input's chunks under other intervals" by the
    chunk key's parent directory being the input's fingerprint; a grouped chunk's parent is
    ``group-NNNNN``, so nothing is found, nothing is taken back, and the reload loads every
    row a second time (green run, every row twice).

    What should happen: as for an input staged in one task: the reload replaces the rows (each
    once), or is refused.
    """
    create_notes(pg_db, key=False)
    s3 = moto_server.client("s3")
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    put(s3, s3_bucket, "in/part-0.csv", notes(1, 150))
    put(s3, s3_bucket, "in/part-1.csv", notes(151, 300))
    nightly = stage_grouped(
        s3, s3_bucket, f"s3://{s3_bucket}/in/", run="2026-11-21T00", probe_key=[]
    )
    assert nightly.groups == 2
    load(hook, nightly)
    assert pg_db.query("SELECT count(*) FROM notes") == [(300,)]

    reloaded = stage_grouped(
        s3, s3_bucket, f"s3://{s3_bucket}/in/", run="2026-11-21T06", probe_key=[]
    )
    try:
        load(hook, reloaded, reload=True)
    except Exception:  # refused loudly: acceptable
        assert pg_db.query("SELECT count(*) FROM notes") == [(300,)]
        return
    assert pg_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(300, 300)]


def test_grouped_staging_never_maps_more_chunks_than_max_map_length(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: a large input with ``core.max_map_length`` at its default; the plan
    task checked the chunk count against it (it raises the chunk size or fails, "more than
    Airflow maps in one task").

    What happened: the plan checks the whole input's estimated size, but each group then cuts
    its own chunks, and a chunk closes only once it reaches the chunk size: every group ends
    in a part chunk, so N groups make up to N-1 more chunks than the whole input would. Here
    4 groups of 1.1-1.3 kB (5 kB in all) in 750-byte chunks make 8 chunks against a limit
    of 7 the plan accepted: ``collect_staging`` returns more chunks than Airflow will map, and the run
    fails after all the staging work instead of at planning.

    What should happen: the chunks collected for the load task never outnumber
    ``max_map_length`` (the plan accounts for one part chunk per group, or fails up front).
    """
    s3 = moto_server.client("s3")
    for part in range(4):
        put(s3, s3_bucket, f"in/part-{part}.csv", notes(part * 100 + 1, part * 100 + 100))
    # fails up front, at planning, naming the limit (no staging work is done)
    with pytest.raises(ValueError, match=r"more than Airflow maps in one task"):
        stage_grouped(
            s3,
            s3_bucket,
            f"s3://{s3_bucket}/in/",
            chunk_size=750,
            resources=Resources(max_map_length=7),
        )
    # with room for a part chunk per group it stages, within the limit
    staged = stage_grouped(
        s3,
        s3_bucket,
        f"s3://{s3_bucket}/in/",
        chunk_size=750,
        resources=Resources(max_map_length=12),
    )
    assert staged.groups == 4
    assert len(staged.manifest.chunks) <= 12


def test_an_empty_part_file_alone_in_a_group_is_loaded_like_ungrouped(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: a Spark/Hive export with an empty part file (0 bytes, as writers
    leave for an empty partition) between two large ones; the group size puts each file in a
    group of its own.

    What happened: the empty file's group stages 0 rows with no columns (``None``), and
    ``collect_staging`` refuses the input: "the input's files do not name the same columns:
    .../part-1.csv (group 1) has None". Staged in one task the same input loads (an empty
    file is skipped).

    What should happen: an empty file's group contributes no chunks and does not decide the
    columns; the input loads exactly.
    """
    create_notes(any_db)
    s3 = moto_server.client("s3")
    put(s3, s3_bucket, "in/part-0.csv", notes(1, 100))
    put(s3, s3_bucket, "in/part-1.csv", "")
    put(s3, s3_bucket, "in/part-2.csv", notes(101, 200))
    control = stage_grouped(s3, s3_bucket, f"s3://{s3_bucket}/in/", group_bytes=0)
    assert control.manifest.total_rows == 200

    staged = stage_grouped(s3, s3_bucket, f"s3://{s3_bucket}/in/", group_bytes=1000)
    assert staged.groups == 3
    load(BulkLoadHook(conn_id=any_db.conn_id), staged)
    assert any_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(200, 200)]


def test_files_ordering_their_columns_differently_load_in_groups_as_ungrouped(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: two exports of the same table, one written ``id,note`` and one
    ``note,id`` (another tool's column order). Staged in one task, each file is mapped by its
    own header (documented: "files may order their columns differently") and the input loads.
    The input then grew past ``stage_group_size`` (4 GB by default) and was staged in groups.

    What happened: ``collect_staging`` refuses it ("do not name the same columns"), although
    each chunk carries its own column list for the load. The same files load or fail depending
    on their total size.

    What should happen: grouping is not visible in the result: the input loads, every note in
    its id's row.
    """
    create_notes(any_db)
    s3 = moto_server.client("s3")
    put(s3, s3_bucket, "in/part-0.csv", notes(1, 100))
    put(
        s3,
        s3_bucket,
        "in/part-1.csv",
        "note,id\n" + "".join(f"note {i},{i}\n" for i in range(101, 201)),
    )
    control = stage_grouped(s3, s3_bucket, f"s3://{s3_bucket}/in/", group_bytes=0)
    assert control.manifest.total_rows == 200

    staged = stage_grouped(s3, s3_bucket, f"s3://{s3_bucket}/in/")
    assert staged.groups == 2
    load(BulkLoadHook(conn_id=any_db.conn_id), staged)
    assert any_db.query(
        "SELECT count(*), count(DISTINCT id), sum(CASE WHEN note = concat('note ', id) THEN 1 END)"
        " FROM notes"
    ) == [(200, 200, 200)]


def test_a_file_rewritten_between_planning_and_its_group_is_not_staged_as_the_planned_one(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: the upstream export re-wrote one of the day's files (one row
    changed, one added) while the run's ``stage_group`` tasks were queued behind other work
    (mapped tasks wait for a pool slot; minutes to hours after the plan task listed the files).

    What happened: the plan fingerprinted the files by their ETags then; ``stage_group``
    downloads whatever the key holds when it runs, and stages the new content under the
    fingerprint (the staging prefix) of the old: the prefix no longer tells the content apart
    (the invariant the ledger's exactly-once rests on, "a changed input gets a new
    fingerprint"), and nothing in the run notices. With one staging task the window is one
    listing-to-download gap; with groups it is the whole queueing delay.

    What should happen: the group stages the version planned (pinned by version/ETag), or
    fails saying the file changed since planning so the plan is taken again.
    """
    s3 = moto_server.client("s3")
    put(s3, s3_bucket, "in/part-0.csv", notes(1, 100))
    put(s3, s3_bucket, "in/part-1.csv", notes(101, 200))
    plan = stage(
        f"s3://{s3_bucket}/in/",
        s3=s3,
        staging_uri=f"s3://{s3_bucket}/staging",
        dag_id="nightly",
        table="notes",
        run="2026-11-21",
        options=StagingOptions(file_format=FileFormat(header=True), chunk_size=100_000),
        group_bytes=1,
    )
    assert len(plan.groups) == 2
    stage_group(plan.groups[0], s3=s3)
    # the rewrite lands while group 1 waits for a worker
    put(s3, s3_bucket, "in/part-1.csv", notes(101, 199) + "200,changed\n201,added\n")

    try:
        staged = stage_group(plan.groups[1], s3=s3)
    except Exception as exc:  # refusing, naming the file, is fine
        assert "part-1.csv" in str(exc)
        return
    body = s3.get_object(Bucket=s3_bucket, Key=staged.chunks[0].object_key)["Body"].read()
    assert b"changed" not in gzip.decompress(body)
    assert staged.total_rows == 100


def test_a_deferred_load_of_a_chunk_already_loaded_does_not_wait_for_a_slot(
    airflow_db: Any, any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: cleared a finished date's run (or its load tasks) while another
    DAG's big load held every load slot of the table; the chunks of the date were all
    committed, so each load task only has to see its ledger entry and skip.

    What happened: the load takes a slot before it looks at the ledger, so each already-loaded
    chunk defers and waits for a slot (up to ``slot_wait_timeout``, 6 h by default), and fails
    with LoadSlotsBusyError when none frees up in time -- a red run for work already done.

    What should happen: a chunk whose ledger entry is there and whose rows are in the table is
    skipped at once, slot or no slot.
    """
    from tests.integration.operators.test_deferred_waits import _hold_slot, _run

    any_db.query("CREATE TABLE t (id INT PRIMARY KEY)")
    chunk = put_chunk(moto_server, s3_bucket, "c0.csv.gz", b"1\n2\n3\n", rows=3)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    assert not hook.load_chunk("t", chunk, load_id="first").skipped
    holder = _hold_slot(hook)
    try:
        states, _ = _run(
            lambda: LoadChunkOperator(
                task_id="load",
                table="t",
                conn_id=any_db.conn_id,
                chunk=chunk,
                max_concurrent_loads=1,
                slot_wait_timeout=3,
                deferrable=True,
                poll_interval=0.5,
            )
        )
    finally:
        holder.close()
    assert states == {"load": "success"}, states
    assert any_db.query("SELECT count(*) FROM t") == [(3,)]


def test_the_plan_never_makes_more_groups_than_airflow_maps(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: many small daily files (a Kinesis Firehose prefix) and a
    ``stage_group_size`` sized for the workers' disk; the files make more groups than
    ``core.max_map_length``.

    What happened: the plan checks the *chunk* count against ``max_map_length`` (and grows
    the chunk size or fails with advice), but not the number of groups it returns for the
    mapped ``stage_group`` task: the plan task's XCom push is then refused by Airflow
    (UnmappableXComLengthPushed) with no word about ``stage_group_size``.

    What should happen: the plan returns at most ``max_map_length`` groups (it joins files
    into larger groups), or fails saying which setting to raise.
    """
    s3 = moto_server.client("s3")
    for part in range(5):
        put(s3, s3_bucket, f"in/part-{part}.csv", notes(part * 10 + 1, part * 10 + 10))
    try:
        plan = stage(
            f"s3://{s3_bucket}/in/",
            s3=s3,
            staging_uri=f"s3://{s3_bucket}/staging",
            dag_id="nightly",
            table="notes",
            run="2026-11-21",
            options=StagingOptions(file_format=FileFormat(header=True), chunk_size=100_000),
            resources=Resources(max_map_length=3),
            group_bytes=1,
        )
    except ValueError as exc:  # failing up front, naming the group size, is fine
        assert "group" in str(exc)
        return
    assert 1 <= len(plan.groups) <= 3


def test_the_same_grouped_input_loaded_by_another_dag_into_a_keyless_table_is_warned(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: renamed the DAG (or copied it) and ran the same date again: the
    same files load a second time into a keyless table, which has nothing to refuse a second
    copy with.

    What happened: ``withdraw_superseded`` warns "same input" when the ledger holds this
    input's fingerprint under another DAG -- found by the chunk key's parent directory, which
    for grouped staging is ``group-NNNNN``: no warning, every row silently twice.

    What should happen: the same warning as for an input staged in one task.
    """
    create_notes(pg_db, key=False)
    s3 = moto_server.client("s3")
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    put(s3, s3_bucket, "in/part-0.csv", notes(1, 150))
    put(s3, s3_bucket, "in/part-1.csv", notes(151, 300))

    def staged_by(dag_id: str) -> Staged:
        plan = stage(
            f"s3://{s3_bucket}/in/",
            s3=s3,
            staging_uri=f"s3://{s3_bucket}/staging",
            dag_id=dag_id,
            table="notes",
            run="2026-11-21",
            options=StagingOptions(file_format=FileFormat(header=True), chunk_size=1000),
            group_bytes=1,
        )
        for group in plan.groups:
            stage_group(group, s3=s3)
        return Staged(plan.manifest_uri, collect_groups(plan.groups, s3=s3), len(plan.groups))

    load(hook, staged_by("old_name"))
    renamed = staged_by("new_name")
    assert renamed.groups == 2

    warnings = hook.reconcile("notes", renamed.manifest_uri).warnings
    assert len(warnings) == 1 and "old_name" in warnings[0], warnings
