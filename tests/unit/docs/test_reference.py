"""The reference pages name every public operator, hook and trigger, with true template fields."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from tests.unit.docs.conftest import DOCS

REFERENCE = DOCS / "reference"
PACKAGES = ("airflow_bulkload.operators", "airflow_bulkload.hooks", "airflow_bulkload.triggers")
_DIRECTIVE = re.compile(r"^:::\s+(?P<path>[\w.]+)\s*$", re.MULTILINE)


def _directives() -> set[str]:
    return {
        m["path"] for page in REFERENCE.glob("*.md") for m in _DIRECTIVE.finditer(page.read_text())
    }


def _public_classes() -> list[tuple[str, type]]:
    found = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj):
                found.append((name, obj))
    return found


@pytest.mark.parametrize("name,cls", _public_classes(), ids=lambda v: getattr(v, "__name__", v))
def test_every_public_class_has_a_reference_entry(name: str, cls: type) -> None:
    path = f"{cls.__module__}.{cls.__qualname__}"
    assert path in _directives(), f"add '::: {path}' to a page under docs/reference/"


def test_every_directive_resolves_to_a_class() -> None:
    for path in _directives():
        module, _, name = path.rpartition(".")
        assert inspect.isclass(getattr(importlib.import_module(module), name)), path


def _template_field_table() -> dict[str, list[str]]:
    text = (REFERENCE / "operators.md").read_text()
    rows = re.findall(r"^\| `(\w+(?:Operator|Sensor))` \| (.+) \|$", text, re.MULTILINE)
    return {name: re.findall(r"`(\w+)`", fields) for name, fields in rows}


def test_template_fields_table_matches_the_code() -> None:
    table = _template_field_table()
    operators = {
        name: cls
        for name, cls in _public_classes()
        if cls.__module__.startswith("airflow_bulkload.operators")
    }
    from airflow_bulkload.operators.report import LoadReportOperator

    operators["LoadReportOperator"] = LoadReportOperator
    assert set(table) == set(operators)
    for name, cls in operators.items():
        assert table[name] == list(cls.template_fields), name
