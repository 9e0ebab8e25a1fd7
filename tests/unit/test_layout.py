"""The package's layout rules: engine differences stay in the dialects, modules stay readable.

A newcomer opens one short module to change one thing; these hold the lines the engine-layer
split drew (engine names checked only under ``dialects/``, only the hooks reach into the dialects,
no module past 500 lines).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_bulkload"
DIALECTS = PACKAGE / "dialects"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_LINES = 500

ENGINE_NAME_CHECK = re.compile(r'name == "postgres"|name == "mysql"|is_mysql')


def _outside_dialects() -> list[Path]:
    return [path for path in MODULES if DIALECTS not in path.parents]


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_package_is_found() -> None:
    assert len(MODULES) > 50
    assert any(DIALECTS in path.parents for path in MODULES)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_longer_than_500_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines: split it by concern"


def test_engine_names_are_checked_only_in_the_dialects() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in _outside_dialects()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ENGINE_NAME_CHECK.search(line)
    ]
    assert not found, "read a capability of the engine (EngineTraits) instead:\n" + "\n".join(found)


def test_only_the_hooks_import_the_dialects() -> None:
    found = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in _outside_dialects()
        if path.parent.name != "hooks"
        for module in _imported_modules(path)
        if module == "airflow_bulkload.dialects" or module.startswith("airflow_bulkload.dialects.")
    ]
    assert not found, "\n".join(found)
