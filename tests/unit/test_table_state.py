"""Pure rules of table preparation."""

from __future__ import annotations

from datetime import datetime

import pytest

from airflow_bulkload.catalog import (
    ColumnInfo,
    ConstraintInfo,
    IndexInfo,
    TableInfo,
    TableRef,
)
from airflow_bulkload.dialects.mysql.ddl import parse_foreign_key_lines
from airflow_bulkload.knobs import (
    default_load_id,
    parse_flag,
    parse_optional_int,
    parse_parallelism,
)
from airflow_bulkload.table_state import (
    DropDecision,
    compare_snapshots,
    decide_drops,
    normalise_ddl,
    plan_drops,
    plan_rebuild,
    reloption_changes,
    snapshot_from_info,
)

MB = 1024 * 1024
T = TableRef("t", "s")


def info(size: int = 0, *, secondary: int = 1, pk: bool = True) -> TableInfo:
    indexes = [IndexInfo(f"ix{i}", f"CREATE INDEX ix{i} ON s.t (a{i})") for i in range(secondary)]
    constraints = []
    if pk:
        indexes.append(
            IndexInfo(
                "t_pkey",
                "CREATE UNIQUE INDEX t_pkey ON s.t USING btree (id)",
                ["id"],
                True,
                True,
                "t_pkey",
            )
        )
        constraints.append(ConstraintInfo("t_pkey", "p", "PRIMARY KEY (id)", T, ["id"]))
    constraints.append(
        ConstraintInfo("t_fk", "f", "FOREIGN KEY (a0) REFERENCES s.o(id)", T, ["a0"])
    )
    incoming = [
        ConstraintInfo("c_fk", "f", "FOREIGN KEY (t_id) REFERENCES s.t(id)", TableRef("c", "s"))
    ]
    return TableInfo(
        table=T,
        columns=[ColumnInfo("id", "int")],
        primary_key=["id"] if pk else [],
        indexes=indexes,
        constraints=constraints,
        referencing_foreign_keys=incoming,
        triggers=[],
        reloptions={"fillfactor": "90"},
        estimated_rows=0,
        size_bytes=size,
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("True", True),
        (" false ", False),
        ("AUTO", None),
        (None, None),
    ],
)
def test_parse_flag(value: object, expected: bool | None) -> None:
    assert parse_flag(value, "drop_indexes") is expected  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["yes", "1", "", "Tru", 1])
def test_parse_flag_refuses_anything_else(value: object) -> None:
    with pytest.raises(ValueError, match="drop_indexes must be True, False or 'auto'"):
        parse_flag(value, "drop_indexes")  # type: ignore[arg-type]


def test_parse_numbers() -> None:
    assert parse_optional_int("123", "n") == 123
    assert parse_optional_int("None", "n") is None
    assert parse_optional_int("", "n") is None
    with pytest.raises(ValueError, match="integer"):
        parse_optional_int("12MB", "n")
    assert parse_parallelism("auto", 5, 2) == 2
    assert parse_parallelism("8", 3, 2) == 3
    with pytest.raises(ValueError, match="parallelism"):
        parse_parallelism(0, 3, 2)


def test_default_load_id_is_the_lease_key() -> None:
    when = datetime(2025, 1, 2)
    assert default_load_id("d", "public.t", when) == "d/public.t/2025-01-02T00:00:00"
    assert default_load_id("d", "t", None) == "d/t/-"


def test_normalise_ddl() -> None:
    assert normalise_ddl(" CREATE  INDEX\n a ON t (x);") == "CREATE INDEX a ON t (x)"


def test_auto_on_an_empty_postgres_table_drops_everything() -> None:
    decision = decide_drops(
        "postgres",
        info(0),
        None,
        drop_indexes=None,
        drop_primary_key=None,
        drop_foreign_keys=None,
        table_empty=True,
    )
    assert decision.drop_unique
    assert (decision.drop_indexes, decision.drop_primary_key, decision.drop_foreign_keys) == (
        True,
        True,
        True,
    )


def test_auto_keeps_indexes_when_the_input_is_small() -> None:
    decision = decide_drops(
        "postgres",
        info(100 * MB),
        10 * MB,
        drop_indexes=None,
        drop_primary_key=None,
        drop_foreign_keys=None,
    )
    assert not decision.drop_indexes and not decision.drop_primary_key
    assert not decision.drop_foreign_keys
    assert "50%" in decision.reasons["drop_indexes"]


def test_auto_drops_secondary_but_keeps_the_pk_for_a_medium_input() -> None:
    decision = decide_drops(
        "postgres",
        info(100 * MB),
        100 * MB,
        drop_indexes=None,
        drop_primary_key=None,
        drop_foreign_keys=None,
    )
    assert decision.drop_indexes and not decision.drop_primary_key
    big = decide_drops(
        "postgres",
        info(100 * MB),
        500 * MB,
        drop_indexes=None,
        drop_primary_key=None,
        drop_foreign_keys=None,
        table_empty=False,
    )
    # unique keys are guards: a table holding rows keeps them however large the input
    assert big.drop_indexes and not big.drop_primary_key and not big.drop_unique
    assert "second copy" in big.reasons["drop_primary_key"]


def test_unique_keys_go_only_on_an_empty_table_or_when_asked() -> None:
    def decide(empty: bool | None, pk: bool | None) -> tuple[bool, bool]:
        d = decide_drops(
            "postgres",
            info(0),
            None,
            drop_indexes=True,
            drop_primary_key=pk,
            drop_foreign_keys=None,
            table_empty=empty,
        )
        return d.drop_primary_key, d.drop_unique

    assert decide(True, None) == (True, True)
    assert decide(False, None) == (False, False)
    assert decide(None, None) == (False, False)  # unknown counts as not empty
    assert decide(False, True) == (True, True)  # the author asked
    assert decide(True, False) == (False, False)


def test_a_state_saved_before_unique_guards_keeps_its_decision() -> None:
    old = {"drop_indexes": True, "drop_primary_key": False, "drop_foreign_keys": True}
    assert DropDecision.from_dict(old).drop_unique


def test_mysql_keeps_pk_and_fks_in_auto_and_refuses_a_forced_pk_drop() -> None:
    decision = decide_drops(
        "mysql", info(0), None, drop_indexes=None, drop_primary_key=None, drop_foreign_keys=None
    )
    assert decision.drop_indexes and not decision.drop_primary_key
    assert not decision.drop_foreign_keys
    with pytest.raises(ValueError, match="clustered"):
        decide_drops(
            "mysql", info(0), None, drop_indexes=True, drop_primary_key=True, drop_foreign_keys=None
        )


def snapshot(**kwargs: object) -> dict:
    return snapshot_from_info("postgres", info(0), needed_by_fk=["t_pkey"])


def test_plan_drops_orders_fks_first_and_keeps_indexes_kept_fks_need() -> None:
    saved = snapshot()
    everything = DropDecision(True, True, True)
    steps, notes = plan_drops(saved, everything, saved)
    assert [(s.kind, s.name) for s in steps] == [
        ("fk", "c_fk"),
        ("fk", "t_fk"),
        ("index", "ix0"),
        ("index", "t_pkey"),
    ]
    steps, notes = plan_drops(saved, DropDecision(True, True, False), saved)
    assert [s.name for s in steps] == ["ix0"]
    assert notes == ["t_pkey: a kept foreign key needs it; kept"]
    # already gone: not dropped again
    current = {**saved, "indexes": [], "foreign_keys": []}
    assert plan_drops(saved, everything, current)[0] == []


def test_plan_rebuild_and_compare() -> None:
    saved = snapshot()
    stripped = {**saved, "indexes": [], "foreign_keys": [], "reloptions": {}}
    plan = plan_rebuild(saved, stripped)
    assert [ix["name"] for ix in plan.create_indexes] == ["t_pkey", "ix0"]
    assert [ix["name"] for ix in plan.attach_constraints] == ["t_pkey"]
    assert [fk["name"] for fk in plan.add_foreign_keys] == ["t_fk", "c_fk"]
    problems = compare_snapshots(saved, stripped)
    assert "index ix0 is missing" in problems
    assert any(p.startswith("reloptions differ") for p in problems)
    assert compare_snapshots(saved, saved) == []
    # the PK's index built, its constraint not attached yet (killed in between): attach only
    half = {
        **saved,
        "indexes": [{**ix, "constraint_name": None} for ix in saved["indexes"]],
    }
    plan = plan_rebuild(saved, half)
    assert plan.create_indexes == [] and [i["name"] for i in plan.attach_constraints] == ["t_pkey"]


def test_reloption_changes() -> None:
    assert reloption_changes(
        {"fillfactor": "90"}, {"fillfactor": "90", "autovacuum_enabled": "false"}
    ) == ({}, ["autovacuum_enabled"])
    assert reloption_changes({"fillfactor": "90"}, {}) == ({"fillfactor": "90"}, [])


def test_parse_foreign_key_lines() -> None:
    create = (
        "CREATE TABLE `t` (\n  `a` int,\n  KEY `a` (`a`),\n"
        "  CONSTRAINT `t``fk` FOREIGN KEY (`a`) REFERENCES `p` (`id`) ON DELETE CASCADE,\n"
        "  CONSTRAINT `chk` CHECK (`a` > 0)\n) ENGINE=InnoDB"
    )
    assert parse_foreign_key_lines(create) == {
        "t`fk": "CONSTRAINT `t``fk` FOREIGN KEY (`a`) REFERENCES `p` (`id`) ON DELETE CASCADE"
    }
