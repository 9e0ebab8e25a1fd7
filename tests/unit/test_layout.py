"""The package's layout rules: engine differences stay in the dialects, modules stay readable.

A newcomer opens one short module to change one thing; these hold the lines the engine-layer
split drew (engine names checked only under ``dialects/``, only the hooks reach into the dialects,
no module past 500 lines).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_bulkload"
DIALECTS = PACKAGE / "dialects"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_LINES = 500

#: what an engine is called in a comparison that branches on it
ENGINE_NAMES = frozenset({"postgres", "postgresql", "mysql", "mariadb"})
#: names of flags that stand for an engine check
ENGINE_FLAGS = frozenset({"is_mysql", "is_postgres", "is_mariadb"})
#: modules outside dialects/ that may name engines in a comparison, and why
ENGINE_NAME_EXCEPTIONS = {
    # RDS's own engine names (aurora-postgresql, mariadb, ...) pick RDS parameter-group settings
    "bulk_mode/policy.py",
}
DIALECTS_MODULE = "airflow_bulkload.dialects"


def _outside_dialects() -> list[Path]:
    return [path for path in MODULES if DIALECTS not in path.parents]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, source: str | None = None) -> set[str]:
    """Every module ``path`` imports, relative imports resolved, ``from a import b`` as ``a.b``.

    ``source``: the module's text, if not the file's.
    """
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module or "").split(".")]).strip(".")
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def _engine_checks(path: Path) -> list[str]:
    """Comparisons with an engine's name (``==``, ``!=``, ``in``), and engine flags, in code."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            values = [
                item
                for operand in operands
                for item in (
                    operand.elts
                    if isinstance(operand, ast.Tuple | ast.List | ast.Set)
                    else [operand]
                )
            ]
            if any(isinstance(v, ast.Constant) and v.value in ENGINE_NAMES for v in values):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in ENGINE_FLAGS:
                found.append(f"line {node.lineno}: {name}")
    return found


def test_the_package_is_found() -> None:
    assert len(MODULES) > 50
    assert any(DIALECTS in path.parents for path in MODULES)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_longer_than_500_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines: split it by concern"


def test_engine_names_are_checked_only_in_the_dialects() -> None:
    found = [
        f"{path.relative_to(PACKAGE)} {check}"
        for path in _outside_dialects()
        if str(path.relative_to(PACKAGE)) not in ENGINE_NAME_EXCEPTIONS
        for check in _engine_checks(path)
    ]
    assert not found, "read a capability of the engine (EngineTraits) instead:\n" + "\n".join(found)


def test_the_engine_check_finder_sees_through_spelling_and_skips_prose(tmp_path: Path) -> None:
    checks = {
        'if engine == "mysql": pass': True,
        "if 'postgres' != kind: pass": True,
        'if kind in ("mysql", "mariadb"): pass': True,
        "x = dialect.is_mysql": True,
        "# the dialects replaced the old is_mysql flag, name == 'mysql'": False,
        '"""engine == "postgres" in prose"""': False,
        'label = {"mysql": 1}["mysql"]': False,
    }
    for source, flagged in checks.items():
        module = tmp_path / "probe.py"
        module.write_text(source + "\n")
        assert bool(_engine_checks(module)) is flagged, source


def test_only_the_hooks_import_the_dialects() -> None:
    found = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in _outside_dialects()
        if PACKAGE / "hooks" not in path.parents
        for module in _imported_modules(path)
        if module == DIALECTS_MODULE or module.startswith(DIALECTS_MODULE + ".")
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("where", "source"),
    [
        ("operators/x.py", "from airflow_bulkload import dialects\n"),
        ("operators/x.py", "from ..dialects import postgres\n"),
        ("operators/x.py", "from .. import dialects\n"),
        ("x.py", "from .dialects.mysql import load\n"),
        ("operators/x.py", "import airflow_bulkload.dialects.mysql as m\n"),
    ],
)
def test_the_import_finder_resolves_every_spelling(where: str, source: str) -> None:
    modules = _imported_modules(PACKAGE / where, source)
    assert any(m == DIALECTS_MODULE or m.startswith(DIALECTS_MODULE + ".") for m in modules), (
        modules
    )
