"""Hostile: the MySQL catalog rewrite (``_table_rows``/``{of_table}``, dict rows, ``_foreign_keys(
referencing=...)``) must read exactly what the previous version read.

The version before the rewrite (commit c0069ff, HEAD when it was written) of
``airflow_bulkload/dialects/mysql/catalog.py`` is loaded from git into a throwaway module; a dialect whose catalog methods come from it is compared with today's
``MySqlDialect`` on hostile tables in MariaDB (``describe_table`` and ``table_snapshot``).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.catalog import TableInfo, TableRef
from airflow_bulkload.dialects.mysql import MySqlDialect
from airflow_bulkload.exceptions import BulkLoadError
from tests.harness import (
    REPO_ROOT,
    ServerSettings,
    TestDatabase,
    _drop_database,
    _mysql_admin,
    fresh_database,
)

CATALOG = "airflow_bulkload/dialects/mysql/catalog.py"
#: the catalog before the ``_table_rows`` rewrite: its last commit (c0069ff), so the comparison
#: stays a comparison once the rewrite is committed
BEFORE = "c0069ff"


@pytest.fixture(scope="module")
def old_dialect(tmp_path_factory: pytest.TempPathFactory) -> MySqlDialect:
    """A MySqlDialect whose catalog methods are those before the rewrite."""
    shown = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "show", f"{BEFORE}:{CATALOG}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode != 0:  # a shallow clone: the history to compare with is not here
        pytest.skip(f"git cannot show {BEFORE}:{CATALOG}: {shown.stderr.strip()}")
    source = shown.stdout
    path = Path(tmp_path_factory.mktemp("old_catalog")) / "old_mysql_catalog.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_mysql_catalog", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)

    class OldDialect(module.MySqlCatalog, MySqlDialect):  # type: ignore[misc,name-defined]
        pass

    assert OldDialect.describe_table is module.MySqlCatalog.describe_table
    assert OldDialect._foreign_keys is module.MySqlCatalog._foreign_keys
    return OldDialect()


@pytest.fixture(scope="module")
def hostile_db(mysql_server: ServerSettings) -> Iterator[TestDatabase]:
    """A second database whose name holds %, %s, {of_table}, {} and a quote."""
    name = f"bl_test_{uuid.uuid4().hex[:8]}_%s{{of_table}}{{}}'%"
    with closing(_mysql_admin(mysql_server)) as admin:
        admin.cursor().execute(
            "CREATE DATABASE `" + name.replace("`", "``") + "` CHARACTER SET utf8mb4"
        )
    db = TestDatabase("mysql", mysql_server, name, "unused", extra={"charset": "utf8mb4"})
    try:
        yield db
    finally:
        _drop_database("mysql", mysql_server, name.replace("`", "``"))


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def both(old: MySqlDialect, db: TestDatabase, table: TableRef) -> tuple[Any, Any, Any, Any]:
    new = MySqlDialect()
    with closing(db.connect()) as conn:
        conn.autocommit(False)
        before_info = old.describe_table(conn, table)
        after_info = new.describe_table(conn, table)
        before_snap = old.table_snapshot(conn, table)
        after_snap = new.table_snapshot(conn, table)
    return before_info, after_info, before_snap, after_snap


PCT = "pct%s{of_table}{}%"
HOSTILE_NAMES = [
    PCT,
    "a`b'c\"d\\e",
    "{0}",
    "%",
    "_",
    "ünï_çødé_表",
    "x" * 64,
    "y" * 60 + "表表表表",
]


def build_hostile_tables(db: TestDatabase, other: TestDatabase) -> None:
    s, o = q(db.name), q(other.name)
    run = db.query
    run(
        f"CREATE TABLE {s}.{q('parent%s')} (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL,"
        " UNIQUE KEY `uq{}` (code))"
    )
    run(
        f"CREATE TABLE {s}.{q(PCT)} ("
        " `id%s` BIGINT NOT NULL AUTO_INCREMENT,"
        " `{of_table}` INT NOT NULL,"
        " `p%` INT NULL,"
        " `e'm``ail` VARCHAR(100) NOT NULL DEFAULT '',"
        " `n` VARCHAR(20) NULL DEFAULT NULL,"
        " `pct` VARCHAR(20) DEFAULT '%s{}%%',"
        " `body` TEXT,"
        " `created` DATE NOT NULL DEFAULT (CURRENT_DATE),"
        " `ts` TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,"
        " `amount` DECIMAL(10,2) DEFAULT (1 + 1),"
        " `g_virt` INT AS (`{of_table}` * 2) VIRTUAL,"
        " `g_stored` VARCHAR(110) AS (CONCAT(`e'm``ail`, '%s')) STORED,"
        " `parent_ref` INT NULL,"
        " `self_ref` BIGINT NULL,"
        " `chk_col` INT CHECK (`chk_col` > 0),"
        " PRIMARY KEY (`id%s`, `created`),"
        " UNIQUE KEY `uq%s` (`e'm``ail`),"
        " UNIQUE KEY `uq_{}` (`{of_table}`, `p%`),"
        " KEY `ix_prefix%` (`n`(5)),"
        " KEY `ix{of_table}` (`created`, `p%`, `n`(3)),"
        " KEY `ix_self` (`self_ref`),"
        " KEY `ix_g` (`g_virt`),"
        " FULLTEXT KEY `ft%s` (`body`),"
        " CONSTRAINT `fk%s` FOREIGN KEY (`parent_ref`) REFERENCES `parent%s` (`id`)"
        "  ON DELETE SET NULL ON UPDATE CASCADE,"
        " CONSTRAINT `fk_self{}` FOREIGN KEY (`self_ref`) REFERENCES `"
        + PCT.replace("`", "``")
        + "` (`id%s`) ON DELETE RESTRICT,"
        " CONSTRAINT `chk%s` CHECK (`p%` IS NULL OR `p%` <> 5),"
        " CONSTRAINT `chk{}` CHECK (`pct` <> '{of_table}')"
        ") ENGINE=InnoDB AUTO_INCREMENT=42 COMMENT='it''s %s {of_table}'"
    )
    run(f"CREATE TRIGGER {s}.`trg%s` BEFORE INSERT ON {s}.{q(PCT)} FOR EACH ROW SET NEW.`n` = '%s'")
    run(f"CREATE TRIGGER {s}.`trg{{}}` AFTER UPDATE ON {s}.{q(PCT)} FOR EACH ROW SET @x = 1")
    # incoming: from the same database and from another database
    run(
        f"CREATE TABLE {s}.{q('child{}')} (id INT PRIMARY KEY, a BIGINT, b DATE,"
        f" CONSTRAINT `fk_child%s` FOREIGN KEY (a, b) REFERENCES {q(PCT)} (`id%s`, `created`)"
        " ON UPDATE CASCADE ON DELETE NO ACTION)"
    )
    other.query(
        f"CREATE TABLE {o}.{q('child{}')} (id INT PRIMARY KEY, a BIGINT, b DATE,"
        f" CONSTRAINT `fk_child%s` FOREIGN KEY (a, b) REFERENCES {s}.{q(PCT)} (`id%s`, `created`))"
    )
    # the same table name, different definitions, in two databases
    run(f"CREATE TABLE {s}.{q('same')} (id INT PRIMARY KEY, a INT, KEY ix_a (a))")
    other.query(
        f"CREATE TABLE {o}.{q('same')} (id INT, b INT, UNIQUE KEY uq_b (b),"
        f" CONSTRAINT fk_x FOREIGN KEY (b) REFERENCES {s}.{q('same')} (id))"
    )
    for name in HOSTILE_NAMES[1:]:
        run(
            f"CREATE TABLE {s}.{q(name)} (`k` INT PRIMARY KEY, `v%s` VARCHAR(5) DEFAULT '{{}}',"
            " KEY `ix%s{}` (`v%s`))"
        )
        run(f"INSERT INTO {s}.{q(name)} (`k`) VALUES (1), (2)")
    run(f"INSERT INTO {s}.{q('parent%s')} VALUES (1, 'a')")
    run(
        f"INSERT INTO {s}.{q(PCT)} (`{{of_table}}`, `p%`, `e'm``ail`, parent_ref) VALUES (1, 2, 'x', 1)"
    )


@pytest.fixture(scope="module")
def main_db(mysql_server: ServerSettings) -> Iterator[TestDatabase]:
    with fresh_database("mysql", mysql_server) as db:
        yield db


@pytest.fixture(scope="module")
def hostile_tables(main_db: TestDatabase, hostile_db: TestDatabase) -> tuple[Any, Any]:
    build_hostile_tables(main_db, hostile_db)
    return main_db, hostile_db


@pytest.mark.parametrize(
    "where,name",
    [("main", n) for n in [*HOSTILE_NAMES, "parent%s", "child{}", "same"]]
    + [("other", "same"), ("other", "child{}")],
)
def test_describe_and_snapshot_are_unchanged_on_hostile_tables(
    old_dialect: MySqlDialect, hostile_tables: tuple[Any, Any], where: str, name: str
) -> None:
    main, other = hostile_tables
    db = main if where == "main" else other
    before_info, after_info, before_snap, after_snap = both(
        old_dialect, db, TableRef(name, db.name)
    )
    # CHECK constraints aside: the old reading also took other tables' same-named checks and
    # column checks (fixed since; test_check_constraints_are_the_tables_own)
    assert without_checks(after_info) == without_checks(before_info)
    assert after_snap == before_snap


def without_checks(info: TableInfo) -> TableInfo:
    return replace(info, constraints=[c for c in info.constraints if c.kind != "c"])


def test_the_hostile_table_is_really_read(
    old_dialect: MySqlDialect, hostile_tables: tuple[Any, Any]
) -> None:
    """Not a vacuous comparison: the hostile table's keys, fks both ways, checks and triggers are
    all there (in the old and the new reading alike)."""
    main, other = hostile_tables
    _, info, _, snap = both(old_dialect, main, TableRef(PCT, main.name))
    assert info.primary_key == ["id%s", "created"]
    assert {ix.name for ix in info.indexes} >= {"uq%s", "uq_{}", "ix{of_table}", "ft%s"}
    assert sorted(fk.name for fk in info.foreign_keys) == ["fk%s", "fk_self{}"]
    assert sorted((str(fk.table), fk.name) for fk in info.referencing_foreign_keys) == sorted(
        [
            (f"{main.name}.child{{}}", "fk_child%s"),
            (f"{other.name}.child{{}}", "fk_child%s"),
            (f"{main.name}.{PCT}", "fk_self{}"),
        ]
    )
    assert info.triggers and set(info.triggers) == {"trg%s", "trg{}"}
    assert {c.name for c in info.constraints if c.kind == "c"} >= {"chk%s", "chk{}"}
    assert info.extra["identity_columns"] == ["id%s"]
    assert info.extra["generated_columns"] == ["g_virt", "g_stored"]
    assert info.extra["comment"] == "it's %s {of_table}"
    assert snap["foreign_keys"]


@pytest.mark.parametrize("name", ["missing", "%", "{of_table}", "%s"])
def test_a_missing_table_fails_alike(
    old_dialect: MySqlDialect, mysql_db: TestDatabase, name: str
) -> None:
    with closing(mysql_db.connect()) as conn:
        with pytest.raises(BulkLoadError) as old_error:
            old_dialect.describe_table(conn, TableRef(name, mysql_db.name))
        with pytest.raises(BulkLoadError) as new_error:
            MySqlDialect().describe_table(conn, TableRef(name, mysql_db.name))
    assert str(new_error.value) == str(old_error.value)


def test_a_table_in_a_missing_database_fails_alike(
    old_dialect: MySqlDialect, mysql_db: TestDatabase
) -> None:
    table = TableRef("t", "no_such_db_%s{of_table}")
    with closing(mysql_db.connect()) as conn:
        with pytest.raises(Exception) as old_error:
            old_dialect.describe_table(conn, table)
        with pytest.raises(Exception) as new_error:
            MySqlDialect().describe_table(conn, table)
    assert (type(new_error.value), str(new_error.value)) == (
        type(old_error.value),
        str(old_error.value),
    )


def test_check_constraints_are_the_tables_own(
    old_dialect: MySqlDialect, mysql_db: TestDatabase
) -> None:
    """On MariaDB, CHECK constraint names are per table, and the old reading joined
    TABLE_CONSTRAINTS to CHECK_CONSTRAINTS on schema and name only: each table got every
    same-named check of its database, with clauses on columns it does not have, and column-level
    checks were not skipped as the docstring says. Found by this hostile round, fixed since."""
    q = mysql_db.query
    q("CREATE TABLE t1 (a INT, CONSTRAINT c CHECK (a > 0))")
    q("CREATE TABLE t2 (b INT, CONSTRAINT c CHECK (b < 5))")
    q("CREATE TABLE t3 (c INT CHECK (c <> 3))")  # a column check, named `c` by MariaDB
    table = TableRef("t1", mysql_db.name)
    with closing(mysql_db.connect()) as conn:
        old = old_dialect.describe_table(conn, table)
        new = MySqlDialect().describe_table(conn, table)
    assert len([c for c in old.constraints if c.kind == "c"]) == 3  # the old reading's bug
    checks = [(c.name, c.definition) for c in new.constraints if c.kind == "c"]
    assert checks == [
        ("c", f"ALTER TABLE `{mysql_db.name}`.`t1` ADD CONSTRAINT `c` CHECK (`a` > 0)")
    ]
