"""README: the first block stays the two make commands; its example DAG is a tested example file."""

from __future__ import annotations

from tests.unit.docs.conftest import EXAMPLES, REPO, code_blocks

README = REPO / "README.md"
FIRST_BLOCK = """\
make demo   # the example pipeline end to end: local PostgreSQL, in-process S3, throwaway Airflow home
make test   # lint, types, then unit + integration + e2e tests against the local servers"""


def test_first_block_is_the_two_commands() -> None:
    first = code_blocks(README)[0]
    assert first.lang == "sh" and first.text == FIRST_BLOCK


def test_example_dag_is_the_tested_example_file() -> None:
    python = [b for b in code_blocks(README) if b.lang == "python"]
    assert len(python) == 1
    assert python[0].text.strip() == (EXAMPLES / "pipeline_dag.py").read_text().strip()


def test_readme_links_to_the_docs() -> None:
    assert "(docs/index.md)" in README.read_text()
