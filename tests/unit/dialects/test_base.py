from __future__ import annotations

import pytest

from airflow_bulkload.catalog import TableRef, check_identifier
from airflow_bulkload.exceptions import InvalidIdentifierError


@pytest.mark.parametrize(
    ("text", "schema", "name"),
    [
        ("events", None, "events"),
        ("public.events", "public", "events"),
        ('"my.schema"."odd""name"', "my.schema", 'odd"name'),
        ("`db`.`t``x`", "db", "t`x"),
        ("a.b", "a", "b"),
    ],
)
def test_parse_splits_qualified_names(text: str, schema: str | None, name: str) -> None:
    ref = TableRef.parse(text)
    assert (ref.schema, ref.name) == (schema, name)


@pytest.mark.parametrize("text", ["", "a.b.c", "a.", ".a", '"unterminated', '"a"x'])
def test_parse_refuses_malformed_names(text: str) -> None:
    with pytest.raises(InvalidIdentifierError):
        TableRef.parse(text)


def test_hostile_text_is_kept_verbatim_for_quoting() -> None:
    ref = TableRef.parse("x; DROP TABLE y; --")
    assert ref.name == "x; DROP TABLE y; --"


def test_check_identifier_refuses_nul_and_overlong() -> None:
    with pytest.raises(InvalidIdentifierError, match="NUL"):
        check_identifier("a\0b", max_length=63)
    with pytest.raises(InvalidIdentifierError, match="longer"):
        check_identifier("x" * 64, max_length=63)
    assert check_identifier("x" * 63, max_length=63) == "x" * 63


def _info(primary_key: list[str], indexes: list[dict], not_null: set[str]) -> object:
    from airflow_bulkload.catalog import ColumnInfo, IndexInfo, TableInfo

    columns = [ColumnInfo(name=c, data_type="int", nullable=c not in not_null) for c in "abcd"]
    return TableInfo(
        table=TableRef(name="t", schema="s"),
        columns=columns,
        primary_key=primary_key,
        indexes=[IndexInfo(name=f"i{n}", definition="", **ix) for n, ix in enumerate(indexes)],
        constraints=[],
        referencing_foreign_keys=[],
        triggers=[],
        reloptions={},
        estimated_rows=0,
        size_bytes=0,
    )


@pytest.mark.parametrize(
    ("primary_key", "indexes", "not_null", "expected"),
    [
        (["a", "b"], [], set(), ["a", "b"]),
        ([], [{"columns": ["c"], "is_unique": True}], {"c"}, ["c"]),
        ([], [{"columns": ["c"], "is_unique": True}], set(), []),  # nullable: not a row identity
        ([], [{"columns": ["c"], "is_unique": False}], {"c"}, []),
        ([], [{"columns": ["c"], "is_unique": True, "predicate": "c > 0"}], {"c"}, []),
        ([], [{"columns": ["c"], "is_unique": True, "is_valid": False}], {"c"}, []),
    ],
)
def test_probe_key_is_the_primary_key_else_a_not_null_unique_index(
    primary_key: list[str], indexes: list[dict], not_null: set[str], expected: list[str]
) -> None:
    from airflow_bulkload.catalog import probe_key_of

    assert probe_key_of(_info(primary_key, indexes, not_null)) == expected  # type: ignore[arg-type]


def test_key_probe_round_trips_through_json() -> None:
    from airflow_bulkload.catalog import KeyProbe

    probe = KeyProbe(["id", "day"], ["1", "2026-01-01"], ["9", "2026-01-02"])
    assert KeyProbe.from_json(probe.to_json()) == probe
    assert KeyProbe.from_json(None) is None
