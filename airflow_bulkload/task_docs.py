"""What each task of a ``bulk_load_table`` group does, shown in the UI's task details (``doc_md``).

Written for the person looking at a failed or slow task at night: what the task did, what it
changed, and what a retry or a clear does.
"""

from __future__ import annotations

from typing import Any

TASK_DOCS: dict[str, str] = {
    "wait_for_input": (
        "**Wait for the input** to appear in S3 (what staging would read: the prefix's own "
        "objects, the glob's matches), up to `wait_for_input`; the run fails when it does not."
    ),
    "stage": (
        "**Stage / plan the input.** Lists the input objects and writes the load's chunks and "
        "manifest: chunks that point at the source objects themselves (direct loads), or "
        "rewritten chunks under the staging prefix. An input that needs rewriting and is larger "
        "than `stage_group_size` (default 4 GB) it plans as groups instead. Changes nothing in "
        "the database. A re-run of the same input reuses the manifest."
    ),
    "stage_group": (
        "**Stage one group of input objects** into sorted/normalised chunks under the staging "
        "prefix. A retry stages the group again from scratch; only the chunks of the last "
        "successful try are listed."
    ),
    "collect_staging": (
        "**Collect the staged groups** into the input's one manifest (each chunk once)."
    ),
    "preflight": (
        "**Pre-flight advice** from the table, the server and the input (after staging in "
        "groups, it first writes the input's manifest from the groups'): primary key, "
        "secondary indexes, foreign keys, storage, parallelism. Warnings are in the log; a "
        "finding at the `fail_on` level fails the run before anything changes."
    ),
    "claim_table": (
        "**Claim the table** for this run (a second load of the same table waits or fails "
        "naming the holder; released by `restore_table`), then **take back the chunks a "
        "superseded input of this load committed** (a failed attempt's input since corrected, "
        "or with `reload` every chunk of this date), so the table never holds a row twice. The "
        "ledger says which rows those are."
    ),
    "enter_bulk_mode": (
        "**Switch the server to bulk settings** (RDS parameter group, `ALTER SYSTEM`, "
        "`SET GLOBAL`) under a lease; `exit_bulk_mode` always switches back."
    ),
    "prepare_table": (
        "**Prepare the table**: save its definition, drop secondary indexes (as advised), turn "
        "autovacuum off for the table. Everything saved is put back by `finalize_table`, or by "
        "`restore_table` when the load fails."
    ),
    "load": (
        "**Load a batch of chunks**, one after another, each in one transaction (COPY / LOAD "
        "DATA) recorded in the chunk ledger: a retry skips the chunks that committed, a failed "
        "chunk leaves no row behind. The log gives rows, bytes and rows/s per chunk."
    ),
    "finalize_table": (
        "**Finalize**: rebuild the dropped indexes and constraints, autovacuum back on, "
        "ANALYZE, then a manual CHECKPOINT (PostgreSQL; skipped with a warning without the "
        "privilege). A retry rebuilds only what is still missing."
    ),
    "restore_table": (
        "**Teardown: put the table back** as it was saved (indexes, constraints, autovacuum) "
        "if finalize did not, and release the claim. Runs whatever failed; does nothing after "
        "a successful finalize."
    ),
    "exit_bulk_mode": (
        "**Teardown: release this run's bulk-mode lease**; the last live lease on the server "
        "switches its settings back. Runs whatever failed."
    ),
    "report": (
        "**Report**: checks that the table holds what the load claims (the table is the "
        "truth), then rows, bytes, rows/s and seconds per stage, as markdown in the log and "
        "a `BULKLOAD_REPORT` JSON line. Emits the group's Asset events."
    ),
}


def describe_tasks(group: Any) -> None:
    """Give each task of ``group`` (a TaskGroup) its ``doc_md`` by its id, unless it has one.

    Mapped tasks take theirs at ``partial()`` (``TASK_DOCS[...]`` passed as ``doc_md``).
    """
    for node_id, task in group.children.items():
        doc = TASK_DOCS.get(node_id.rpartition(".")[2])
        if doc and not getattr(task, "is_mapped", False) and not task.doc_md:
            task.doc_md = doc
