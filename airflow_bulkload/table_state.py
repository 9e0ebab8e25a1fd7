"""Pure rules of table preparation: what to save, what to drop, what to rebuild, and how to check.

No I/O here. :class:`~airflow_bulkload.hooks.table_state.TableStateHook` applies these rules to a
real table; the SQL lives in the dialects.

The saved state ("snapshot") is a JSON-able dict::

    {
      "engine": "postgres",
      "table": {"schema": "public", "name": "events"},
      "indexes": [{"name", "definition", "is_primary", "is_unique", "constraint_name",
                   "constraint_definition", "columns", "method", "needed_by_fk"}],
      "foreign_keys": [{"name", "schema", "table", "definition", "columns", "incoming"}],
      "reloptions": {...}, "toast_reloptions": {...},
      "size_bytes": 123, "estimated_rows": 4,
    }

Definitions are the catalog's own DDL (PostgreSQL ``pg_get_indexdef``/``pg_get_constraintdef``
with the search path emptied; MySQL's ``SHOW CREATE TABLE`` key lines), replayed as captured.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_bulkload.advice.models import InputSummary, PreflightInputs
from airflow_bulkload.advice.plan import (
    DROP_INDEXES_MIN_RATIO,
    should_drop_indexes,
)
from airflow_bulkload.catalog import EngineTraits, TableInfo

#: status of a saved table state: captured (nothing changed yet), objects dropped, put back
STATUS_SAVED = "saved"
STATUS_PREPARED = "prepared"
STATUS_DONE = "done"
STATUSES = (STATUS_SAVED, STATUS_PREPARED, STATUS_DONE)


def normalise_ddl(text: str | None) -> str:
    """Whitespace collapsed, trailing ``;`` dropped: two DDL texts equal after this are the same."""
    return re.sub(r"\s+", " ", (text or "").strip().rstrip(";")).strip()


# -- snapshots ------------------------------------------------------------------------------------
def snapshot_from_info(
    engine: str, info: TableInfo, *, needed_by_fk: Iterable[str] = ()
) -> dict[str, Any]:
    """The saved state of a table, from :meth:`Dialect.describe_table` output.

    ``needed_by_fk``: index names a foreign key depends on (PostgreSQL: indexes referenced by FKs
    pointing at the table; MySQL: indexes InnoDB uses for FKs either way).
    """
    needed = set(needed_by_fk)
    constraint_defs = {c.name: c.definition for c in info.constraints if c.kind in ("p", "u", "x")}
    indexes = [
        {
            "name": ix.name,
            "definition": ix.definition,
            "is_primary": ix.is_primary,
            "is_unique": ix.is_unique,
            "constraint_name": ix.constraint_name,
            "constraint_definition": constraint_defs.get(ix.constraint_name or ""),
            "constraint_kind": next(
                (c.kind for c in info.constraints if c.name == ix.constraint_name), None
            ),
            "columns": list(ix.columns),
            "method": ix.method,
            "needed_by_fk": ix.name in needed,
            "comment": ix.comment,
            "constraint_comment": ix.constraint_comment,
        }
        for ix in info.indexes
    ]
    fks = []
    for incoming, group in ((False, info.foreign_keys), (True, info.referencing_foreign_keys)):
        for fk in group:
            owner = fk.table or info.table
            fks.append(
                {
                    "name": fk.name,
                    "schema": owner.schema,
                    "table": owner.name,
                    "definition": fk.definition,
                    "columns": list(fk.columns),
                    "incoming": incoming,
                }
            )
    return {
        "engine": engine,
        "table": {"schema": info.table.schema, "name": info.table.name},
        "indexes": indexes,
        "foreign_keys": fks,
        "reloptions": dict(info.reloptions),
        "toast_reloptions": dict(info.extra.get("toast_reloptions") or {}),
        "partition_reloptions": {
            f"{schema}.{name}": dict(options)
            for schema, name, options in info.extra.get("partitions") or []
        },
        "size_bytes": info.size_bytes,
        "estimated_rows": info.estimated_rows,
    }


def primary_key_of_snapshot(saved: Mapping[str, Any]) -> list[str]:
    """The primary key columns a saved snapshot records (empty when the table had none)."""
    primary = next((ix for ix in saved.get("indexes", []) if ix.get("is_primary")), None)
    return list(primary["columns"]) if primary else []


def fk_key(fk: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(fk.get("schema") or ""), str(fk["table"]), str(fk["name"]))


# -- the decision ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class DropDecision:
    """What prepare drops and why; stored with the saved state so a re-run keeps to it."""

    drop_indexes: bool
    drop_primary_key: bool
    drop_foreign_keys: bool
    reasons: dict[str, str] = field(default_factory=dict)
    #: secondary UNIQUE indexes go too (they are guards like the primary key)
    drop_unique: bool = False
    #: the table held no row when prepare first saw it (exact, not from statistics)
    table_empty: bool | None = None
    #: rows the chunk ledger recorded for the table at that moment
    ledger_rows_before: int | None = None
    #: the table's own foreign keys go too, not only those pointing at it (False: they check
    #: every loaded row, so an orphan fails its chunk instead of breaking the rebuild)
    drop_outgoing_fks: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DropDecision:
        return cls(
            drop_indexes=bool(data["drop_indexes"]),
            drop_primary_key=bool(data["drop_primary_key"]),
            drop_foreign_keys=bool(data["drop_foreign_keys"]),
            reasons=dict(data.get("reasons") or {}),
            # a state saved before unique indexes were guards dropped them with the others
            drop_unique=bool(data.get("drop_unique", data["drop_indexes"])),
            table_empty=data.get("table_empty"),
            ledger_rows_before=data.get("ledger_rows_before"),
            drop_outgoing_fks=bool(data.get("drop_outgoing_fks", True)),
        )


def decide_drops(
    engine: str,
    info: TableInfo,
    incoming_bytes: int | None,
    *,
    drop_indexes: bool | None,
    drop_primary_key: bool | None,
    drop_foreign_keys: bool | None,
    table_empty: bool | None = None,
    drop_unique_indexes: bool | None = None,
) -> DropDecision:
    """Resolve the three knobs (``None`` = auto).

    Unique keys are guards: with them in place a second copy of a row fails its chunk instead of
    committing. So the primary key and secondary UNIQUE indexes are dropped, on auto, only when
    the table is verifiably empty (``table_empty``, an exact check), where a duplicate can only
    come from the input itself and the rebuild catches it before the run ends green (restore then
    empties the table again); ``drop_primary_key=True`` drops them anyway, ``False`` keeps them;
    ``drop_unique_indexes`` decides the secondary unique indexes alone (auto: as the primary key).

    * indexes, auto: :func:`airflow_bulkload.advice.plan.should_drop_indexes` — drop when the
      table is (nearly) empty (< ``SMALL_TABLE_BYTES``) or the incoming data is at least
      ``DROP_INDEXES_MIN_RATIO`` of the table's size (data + indexes); keep when unknown.
    * primary key, auto: PostgreSQL only, when secondary indexes go too (or there are none) and the
      table is empty. Never on MySQL: InnoDB clusters rows by the PK, dropping it rebuilds the
      table (``True`` is refused).
    * secondary unique indexes: with the other indexes, when the table is empty or the primary
      key is dropped on request.
    * foreign keys, auto: PostgreSQL drops them (both directions) with the indexes; MySQL keeps
      them (the load keeps ``foreign_key_checks`` on for a table with foreign keys).
    """
    reasons: dict[str, str] = {}
    if info.extra.get("relkind") == "p":
        forced = [
            name
            for name, value in (
                ("drop_indexes", drop_indexes),
                ("drop_primary_key", drop_primary_key),
                ("drop_foreign_keys", drop_foreign_keys),
                ("drop_unique_indexes", drop_unique_indexes),
            )
            if value is True
        ]
        if forced:
            raise ValueError(
                f"{', '.join(forced)}=True is refused for the partitioned table {info.table}: its "
                "indexes and keys are partitioned (one per partition, attached to the parent's); "
                "they are kept through the load, autovacuum goes off per partition"
            )
        why = "partitioned table: indexes, keys and foreign keys are kept (auto)"
        return DropDecision(
            False,
            False,
            False,
            {"drop_indexes": why, "drop_primary_key": why, "drop_foreign_keys": why},
            drop_unique=False,
            table_empty=table_empty,
            drop_outgoing_fks=False,
        )
    summary = InputSummary(total_bytes=incoming_bytes) if incoming_bytes else None
    inputs = PreflightInputs(engine=engine, table=info, input=summary)
    if drop_indexes is None:
        drop_ix, reasons["drop_indexes"] = should_drop_indexes(inputs)
        reasons["drop_indexes"] += f" (auto; threshold {DROP_INDEXES_MIN_RATIO:.0%})"
    else:
        drop_ix = drop_indexes
        reasons["drop_indexes"] = f"forced {drop_indexes}"

    traits = EngineTraits.of(engine)
    has_pk = bool(info.primary_key)
    if drop_primary_key is True and traits.clustered_primary_key:
        raise ValueError(
            "drop_primary_key=True is refused on MySQL/InnoDB: the primary key is the clustered "
            "index, dropping it rebuilds the whole table (and re-adding rebuilds it again)"
        )
    if drop_primary_key is None:
        if traits.clustered_primary_key:
            drop_pk, why = False, "MySQL/InnoDB: the primary key is the clustered index; kept"
        elif not has_pk:
            drop_pk, why = False, "the table has no primary key"
        elif not (drop_ix or not info.secondary_indexes):
            drop_pk, why = False, "secondary indexes are kept, so the primary key is kept too"
        elif table_empty is not True:
            drop_pk, why = (
                False,
                "the table holds rows: the primary key stays to reject a second copy of a row "
                "(a re-delivered file, an overlapping input) chunk by chunk",
            )
        else:
            drop_pk, why = (
                True,
                "the table is empty: drop everything incl. the primary key and rebuild in "
                "parallel sessions (a duplicate in the input fails the rebuild; restore then "
                "empties the table again)",
            )
        reasons["drop_primary_key"] = why + " (auto)"
    else:
        drop_pk = drop_primary_key and has_pk
        reasons["drop_primary_key"] = f"forced {drop_primary_key}"
    if drop_unique_indexes is None:
        drop_unique = drop_ix and (
            drop_primary_key is True or (drop_primary_key is None and table_empty is True)
        )
    else:
        drop_unique = drop_ix and drop_unique_indexes
    if drop_ix:
        reasons["drop_unique"] = (
            "unique indexes dropped with the others" + (" (table empty)" if table_empty else "")
            if drop_unique
            else "unique indexes kept: they reject a second copy of a row while the table holds rows"
        )

    if drop_foreign_keys is None:
        if traits.foreign_keys_checked_on_load:
            drop_fk = False
            reasons["drop_foreign_keys"] = "MySQL: foreign keys kept; the load checks them (auto)"
        else:
            drop_fk = drop_ix or drop_pk
            reasons["drop_foreign_keys"] = (
                "dropped with the indexes (auto)" if drop_fk else "indexes kept, so kept (auto)"
            )
            if drop_fk and table_empty is not True:
                reasons["drop_foreign_keys"] += (
                    "; the table's own foreign keys are kept while it holds rows: they reject an "
                    "orphan row in its chunk"
                )
    else:
        drop_fk = drop_foreign_keys
        reasons["drop_foreign_keys"] = f"forced {drop_foreign_keys}"
    return DropDecision(
        drop_ix,
        bool(drop_pk),
        drop_fk,
        reasons,
        drop_unique=drop_unique,
        table_empty=table_empty,
        drop_outgoing_fks=drop_foreign_keys is True or table_empty is True,
    )


# -- plans ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DropStep:
    kind: str  # "fk" or "index"
    name: str
    target: dict[str, Any]


def plan_drops(
    saved: Mapping[str, Any], decision: DropDecision, current: Mapping[str, Any]
) -> tuple[list[DropStep], list[str]]:
    """The objects to drop now, in a safe order, and notes on objects kept although asked for.

    The order: foreign keys, secondary indexes, primary key; objects already gone are left out.

    An index a kept foreign key needs is kept (the engine refuses to drop it).
    """
    steps: list[DropStep] = []
    notes: list[str] = []
    present_fks = {fk_key(fk) for fk in current.get("foreign_keys", [])}
    present_ix = {ix["name"] for ix in current.get("indexes", [])}
    if decision.drop_foreign_keys:
        for fk in sorted(saved["foreign_keys"], key=lambda f: not f["incoming"]):
            if not fk["incoming"] and not decision.drop_outgoing_fks:
                notes.append(f"{fk['name']}: checks every loaded row against its parent; kept")
                continue
            if fk_key(fk) in present_fks:
                steps.append(DropStep("fk", fk["name"], dict(fk)))
    indexes = [ix for ix in saved["indexes"] if not ix["is_primary"]]
    indexes += [ix for ix in saved["indexes"] if ix["is_primary"]]
    for ix in indexes:
        if ix["is_primary"]:
            wanted = decision.drop_primary_key
        elif ix.get("is_unique"):
            wanted = decision.drop_indexes and decision.drop_unique
        else:
            wanted = decision.drop_indexes
        if not wanted:
            if ix.get("is_unique") and not ix["is_primary"] and decision.drop_indexes:
                notes.append(f"{ix['name']}: a unique index guards against duplicates; kept")
            continue
        if ix.get("constraint_kind") == "x":
            notes.append(f"{ix['name']}: backs an exclusion constraint; kept")
            continue
        if ix.get("needed_by_fk") and not decision.drop_foreign_keys:
            notes.append(f"{ix['name']}: a kept foreign key needs it; kept")
            continue
        if ix["name"] in present_ix:
            steps.append(DropStep("index", ix["name"], dict(ix)))
    return steps, notes


@dataclass(frozen=True)
class RebuildPlan:
    """What is missing from the table compared with the saved state."""

    create_indexes: list[dict[str, Any]]  # build these (CREATE [UNIQUE] INDEX / ADD KEY)
    attach_constraints: list[dict[str, Any]]  # then make these indexes PK/UNIQUE constraints
    add_foreign_keys: list[dict[str, Any]]  # then these foreign keys

    @property
    def empty(self) -> bool:
        return not (self.create_indexes or self.attach_constraints or self.add_foreign_keys)


def plan_rebuild(saved: Mapping[str, Any], current: Mapping[str, Any]) -> RebuildPlan:
    """Saved objects the table lacks now.

    An index left without its constraint (a run killed between the two steps) is only attached.
    """
    current_ix = {ix["name"]: ix for ix in current.get("indexes", [])}
    separate_constraints = EngineTraits.of(saved["engine"]).index_backed_constraints
    create: list[dict[str, Any]] = []
    attach: list[dict[str, Any]] = []
    for ix in saved["indexes"]:
        now = current_ix.get(ix["name"])
        if now is None:
            create.append(dict(ix))
            if ix.get("constraint_name") and separate_constraints:
                attach.append(dict(ix))
        elif ix.get("constraint_name") and not now.get("constraint_name"):
            attach.append(dict(ix))
    # the primary key first: it usually is the biggest build and others wait on its constraint
    create.sort(key=lambda ix: not ix["is_primary"])
    present_fks = {fk_key(fk) for fk in current.get("foreign_keys", [])}
    fks = [dict(fk) for fk in saved["foreign_keys"] if fk_key(fk) not in present_fks]
    return RebuildPlan(create, attach, fks)


def compare_snapshots(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Differences between the saved state and the table now (empty: identical).

    Compares each saved index's and constraint's normalised DDL, each saved foreign key's, and the
    reloptions. Objects created by others in between are not the saved state's business.
    """
    problems: list[str] = []
    now_ix = {ix["name"]: ix for ix in current.get("indexes", [])}
    for ix in saved["indexes"]:
        now = now_ix.get(ix["name"])
        if now is None:
            problems.append(f"index {ix['name']} is missing")
            continue
        if normalise_ddl(now["definition"]) != normalise_ddl(ix["definition"]):
            problems.append(
                f"index {ix['name']} differs: saved {ix['definition']!r}, now {now['definition']!r}"
            )
        for key in ("comment", "constraint_comment"):
            if key in ix and ix.get(key) != now.get(key):
                problems.append(
                    f"index {ix['name']}: {key.replace('_', ' ')} differs: saved "
                    f"{ix.get(key)!r}, now {now.get(key)!r}"
                )
        if (ix.get("constraint_name") or None) != (now.get("constraint_name") or None):
            problems.append(
                f"index {ix['name']} backs constraint {now.get('constraint_name')!r}, "
                f"saved {ix.get('constraint_name')!r}"
            )
        elif normalise_ddl(ix.get("constraint_definition")) != normalise_ddl(
            now.get("constraint_definition")
        ):
            problems.append(
                f"constraint {ix.get('constraint_name')} differs: saved "
                f"{ix.get('constraint_definition')!r}, now {now.get('constraint_definition')!r}"
            )
    now_fk = {fk_key(fk): fk for fk in current.get("foreign_keys", [])}
    for fk in saved["foreign_keys"]:
        now = now_fk.get(fk_key(fk))
        label = f"foreign key {fk['name']} on {fk.get('schema')}.{fk['table']}"
        if now is None:
            problems.append(f"{label} is missing")
        elif normalise_ddl(now["definition"]) != normalise_ddl(fk["definition"]):
            problems.append(
                f"{label} differs: saved {fk['definition']!r}, now {now['definition']!r}"
            )
    now_leaves = current.get("partition_reloptions") or {}
    for leaf, options in (saved.get("partition_reloptions") or {}).items():
        if leaf in now_leaves and dict(options) != dict(now_leaves[leaf]):
            problems.append(
                f"reloptions of partition {leaf} differ: saved {options}, now {now_leaves[leaf]}"
            )
    for key in ("reloptions", "toast_reloptions"):
        if dict(saved.get(key) or {}) != dict(current.get(key) or {}):
            problems.append(f"{key} differ: saved {saved.get(key)}, now {current.get(key)}")
    return problems


def reloption_changes(
    saved: Mapping[str, str], current: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """(options to SET, options to RESET) that turn ``current`` into ``saved``."""
    to_set = {k: v for k, v in saved.items() if current.get(k) != v}
    to_reset = sorted(k for k in current if k not in saved)
    return to_set, to_reset
