"""Every example file in docs/examples builds its DAG(s): parsing a DAG file needs no servers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.unit.docs.conftest import EXAMPLES

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.py"))


def _load(path: Path) -> dict[str, object]:
    name = f"bulkload_docs_example_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return vars(module)


def test_there_are_examples() -> None:
    assert len(EXAMPLE_FILES) >= 5


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_builds_a_dag(path: Path) -> None:
    from airflow.sdk import DAG

    names = _load(path)
    dags = [v for v in names.values() if isinstance(v, DAG)]
    assert dags, f"{path.name} defines no DAG"
    for dag in dags:
        assert dag.task_ids, f"{dag.dag_id} in {path.name} has no tasks"
        dag.validate()


def test_example_dag_ids_are_unique() -> None:
    ids = []
    for path in EXAMPLE_FILES:
        text = path.read_text()
        ids += [line.split('"')[1] for line in text.splitlines() if 'dag_id="' in line]
    assert len(ids) == len(set(ids)), ids
