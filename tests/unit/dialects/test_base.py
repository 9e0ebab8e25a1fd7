from __future__ import annotations

import pytest

from airflow_bulkload.dialects.base import TableRef, check_identifier
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
