"""The recommended plan: parallelism, drop indexes or not, sort or not, chunk size."""

from __future__ import annotations

import math

from airflow_bulkload.advice.models import GB, MB, InputSummary, LoadPlan, PreflightInputs
from airflow_bulkload.catalog import EngineTraits

#: staged chunk size bounds and default (stored bytes), from the 100 MB - 1 GB file-size guidance
MIN_CHUNK_SIZE = 100 * MB
MAX_CHUNK_SIZE = 1 * GB
DEFAULT_CHUNK_SIZE = 256 * MB
#: parallelism when the vCPU count is unknown (self-managed server, no ``vcpus`` given)
DEFAULT_PARALLELISM = 2
#: ``maintenance_work_mem`` of each index-build session (finalize, restore). Measured on 2 cores
#: with three builds at once (docs/performance.md): in one run of the index profile, 64 MB built
#: the indexes of 10 M rows in 7.9-9.0 s against 11.0-11.6 s at 1 GB; in pipeline runs of one
#: morning, finalize took 26.0 s against 34.1 s (10 M rows) and 126.8 s against 162.9 s (50 M).
#: PostgreSQL's external sort in small runs beats one in-memory sort of the whole index here.
INDEX_BUILD_MEMORY = "64MB"
#: tables smaller than this count as empty: rebuilding their indexes costs next to nothing
SMALL_TABLE_BYTES = 16 * MB
#: drop/rebuild secondary indexes when the incoming data is at least this share of the table.
#: A judgment, not a measurement: keeping N indexes costs ≈+47 % (one) to ≈2x (two) of the load of
#: the *incoming* rows, rebuilding costs a sort of the *whole* table per index.
DROP_INDEXES_MIN_RATIO = 0.5
#: each engine's measured optimum (see optimal_parallelism), in words, and why
PARALLELISM_RULE = {
    "mysql": "≈60 % of vCPUs, at least 2",
    "postgres": "vCPUs - 1, at least 2",
}
PARALLELISM_RATIONALE = {
    "mysql": "≈60 % of vCPUs (10 threads of 16 vCPUs was the measured MySQL optimum), at least 2 "
    "(on 2 vCPUs two sessions loaded faster than one)",
    "postgres": "vCPUs - 1 sessions (RDS PostgreSQL guideline), at least 2 (on 2 vCPUs two "
    "sessions loaded faster than one)",
}


def optimal_parallelism(engine: str, vcpus: int) -> int:
    """PostgreSQL: vCPUs - 1 sessions; MySQL: ≈60 % of vCPUs (10 of 16 measured optimal).

    At least two on a server with two or more vCPUs: both rules give one on 2 vCPUs, where two
    sessions loaded 10 M rows faster than one on both engines (docs/performance.md).
    """
    share = EngineTraits.of(engine).load_sessions_per_vcpu
    by_rule = round(vcpus * share) if share is not None else vcpus - 1
    return max(min(2, vcpus), by_rule, 1)


def incoming_ratio(inputs: PreflightInputs) -> float | None:
    """Incoming data relative to the table's current size (data + indexes), when both are known."""
    if inputs.input is None or inputs.input.data_bytes <= 0:
        return None
    return inputs.input.data_bytes / max(inputs.table.size_bytes, 1)


def should_drop_indexes(inputs: PreflightInputs) -> tuple[bool, str]:
    table = inputs.table
    count = len(table.secondary_indexes)
    if count == 0:
        return False, "the table has no secondary indexes"
    if table.extra.get("relkind") == "p":
        return False, (
            f"{count} partitioned index(es) kept: a partitioned table's indexes are one per "
            "partition, attached to the parent's, and are not dropped for a load"
        )
    if table.size_bytes < SMALL_TABLE_BYTES:
        return True, (
            f"{count} secondary index(es) on a (nearly) empty table: build them once after the load "
            "instead of maintaining them row by row"
        )
    ratio = incoming_ratio(inputs)
    if ratio is None:
        return False, (
            f"{count} secondary index(es) kept: the input size is unknown and the table is not empty, "
            "so a rebuild may cost more than it saves (give the manifest or input_bytes)"
        )
    if ratio >= DROP_INDEXES_MIN_RATIO:
        return True, (
            f"{count} secondary index(es); the input is {ratio:.0%} of the table's size "
            f"(≥ {DROP_INDEXES_MIN_RATIO:.0%}): rebuilding after the load is cheaper"
        )
    return False, (
        f"{count} secondary index(es) kept: the input is only {ratio:.0%} of the table's size "
        f"(< {DROP_INDEXES_MIN_RATIO:.0%}), rebuilding would sort the whole table"
    )


def input_in_key_order(inputs: PreflightInputs) -> bool:
    """Whether the input is known to be sorted by the table's primary key.

    Sorted by a prefix of the key that starts with its first column counts too.
    """
    pk = inputs.table.primary_key
    sorted_by = inputs.input.sorted_by if inputs.input else None
    return bool(pk and sorted_by and list(sorted_by[: len(pk)]) == pk[: len(sorted_by)])


def should_sort(inputs: PreflightInputs) -> tuple[bool, str]:
    if not inputs.table.primary_key:
        return False, "no primary key to sort by"
    if input_in_key_order(inputs):
        return False, "the input is already in primary-key order"
    if inputs.traits.clustered_primary_key:
        return True, (
            "InnoDB stores rows in primary-key order; input in key order loaded ≈20 % faster "
            "(up to 45 % on 20 M rows)"
        )
    return False, (
        "PostgreSQL stores rows in a heap, not in key order; the measured gains of sorting are "
        "InnoDB's, so sorting is not worth the staging time"
    )


def recommend_chunk_size(total_bytes: int | None, parallelism: int) -> int:
    """Two chunks per worker so the pool stays busy, within 100 MB - 1 GB."""
    if not total_bytes:
        return DEFAULT_CHUNK_SIZE
    target = total_bytes / max(parallelism * 2, 1)
    size = min(max(target, MIN_CHUNK_SIZE), MAX_CHUNK_SIZE)
    return int(math.ceil(size / MB) * MB)


def expected_chunks(summary: InputSummary | None, chunk_size: int) -> int | None:
    if summary is None:
        return None
    if summary.staged:
        return summary.chunk_count
    if summary.total_bytes <= 0:
        return None
    return max(1, math.ceil(summary.total_bytes / chunk_size))


def loads_take_turns(inputs: PreflightInputs) -> list[str]:
    """The AUTO_INCREMENT columns that make MySQL loads into the table run one at a time.

    With ``innodb_autoinc_lock_mode`` below 2 (MariaDB's default is 1), every ``LOAD DATA``
    into a table with an AUTO_INCREMENT column holds the table's AUTO-INC lock until the
    statement ends, so a second load session only waits, and fails after
    ``innodb_lock_wait_timeout``. Empty when the lock mode is 2 or unknown.
    """
    server = inputs.server
    if not inputs.traits.autoinc_lock_per_load or server is None:
        return []
    mode = server.extra.get("innodb_autoinc_lock_mode")
    if not isinstance(mode, int) or mode >= 2:
        return []
    return [str(c) for c in inputs.table.extra.get("identity_columns") or []]


def recommend_plan(inputs: PreflightInputs) -> LoadPlan:
    """The plan for ``inputs`` as if every knob were "auto"."""
    rationale: dict[str, str] = {}
    vcpus = inputs.vcpus
    if autoinc := loads_take_turns(inputs):
        parallelism = 1
        rationale["parallelism"] = (
            f"1: AUTO_INCREMENT column {', '.join(autoinc)} with innodb_autoinc_lock_mode < 2 "
            "(each LOAD DATA holds the table's AUTO-INC lock until it ends)"
        )
    elif vcpus:
        parallelism = optimal_parallelism(inputs.engine, vcpus)
        rationale["parallelism"] = f"{vcpus} vCPUs: " + PARALLELISM_RATIONALE[inputs.engine]
    else:
        parallelism = DEFAULT_PARALLELISM
        rationale["parallelism"] = (
            f"vCPU count unknown: {DEFAULT_PARALLELISM} (give vcpus= or an RDS instance)"
        )

    summary = inputs.input
    chunk_size = recommend_chunk_size(summary.total_bytes if summary else None, parallelism)
    if summary is None or not summary.total_bytes:
        rationale["chunk_size"] = "input size unknown: the 256 MB default"
    else:
        rationale["chunk_size"] = "two chunks per parallel worker, within 100 MB - 1 GB" + (
            f" (the input is already staged in {summary.chunk_count} chunk(s); "
            "this applies when staging again)"
            if summary.staged
            else ""
        )
    chunks = expected_chunks(summary, inputs.options.chunk_size or chunk_size)
    if chunks is not None and chunks < parallelism:
        parallelism = chunks
        rationale["parallelism"] += f"; capped at the {chunks} chunk(s) to load"

    drop, why_drop = should_drop_indexes(inputs)
    rationale["drop_indexes"] = why_drop
    sort, why_sort = should_sort(inputs)
    rationale["sort"] = why_sort
    return LoadPlan(
        parallelism=parallelism,
        drop_indexes=drop,
        sort=sort,
        chunk_size=chunk_size,
        rationale=rationale,
        # one session more than vCPUs, so a core is not left idle while the longest builds
        # finish (the floor's measured pattern: every index at once on 2 cores)
        index_build_parallelism=(vcpus or DEFAULT_PARALLELISM) + 1,
    )
