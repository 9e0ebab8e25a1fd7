"""No stale samples: every code block in the docs is a snippet of a tested file or is checked here."""

from __future__ import annotations

import json
import re

import pytest

from tests.unit.docs.conftest import DOCS, REPO, Block, code_blocks, pages, snippet_paths

ALL_BLOCKS = [block for page in pages() for block in code_blocks(page)]


def _ids(block: Block) -> str:
    return f"{block.where()}:{block.lang or 'text'}"


def test_docs_have_pages_and_blocks() -> None:
    names = {p.relative_to(DOCS).as_posix() for p in pages()}
    assert {"index.md", "quickstart.md", "preflight.md", "performance.md"} <= names
    assert ALL_BLOCKS


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.lang in ("python", "py")], ids=_ids)
def test_python_blocks_are_tested_snippets_or_compile(block: Block) -> None:
    included = snippet_paths(block.text)
    if included:
        rest = [line for line in block.text.splitlines() if line.strip() and "--8<--" not in line]
        assert not rest, f"{block.where()}: mix no inline code with a snippet include"
        for path in included:
            assert path.startswith("docs/examples/") and path.endswith(".py"), (
                f"{block.where()}: python snippets come from docs/examples (tested), not {path}"
            )
        return
    compile(block.text, block.where(), "exec")


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.lang == "json"], ids=_ids)
def test_json_blocks_parse(block: Block) -> None:
    included = snippet_paths(block.text)
    texts = [(REPO / p).read_text() for p in included] if included else [block.text]
    for text in texts:
        json.loads(text)


def test_every_snippet_include_exists() -> None:
    for page in pages():
        for path in snippet_paths(page.read_text()):
            assert (REPO / path).is_file(), f"{page.name}: {path} does not exist"


def test_every_example_file_is_shown_somewhere() -> None:
    shown = {p for page in pages() for p in snippet_paths(page.read_text())}
    for example in sorted((DOCS / "examples").glob("*.py")):
        assert f"docs/examples/{example.name}" in shown, f"{example.name} is on no page"


def test_no_secrets_in_docs() -> None:
    pattern = re.compile(r"AKIA[0-9A-Z]{16}|aws_secret_access_key\s*[=:]\s*\S{20,}", re.IGNORECASE)
    for page in [*pages(), REPO / "README.md"]:
        assert not pattern.search(page.read_text()), page


def test_troubleshooting_names_every_error_class() -> None:
    import inspect

    from airflow_bulkload import exceptions
    from airflow_bulkload.staging import normalize, sources, stager

    text = (DOCS / "troubleshooting.md").read_text()
    classes = {
        name
        for module in (exceptions, normalize, sources, stager)
        for name, obj in vars(module).items()
        if inspect.isclass(obj)
        and issubclass(obj, exceptions.BulkLoadError)
        and obj.__module__ == module.__name__
    }
    assert classes
    missing = {name for name in classes if f"`{name}`" not in text}
    assert not missing, f"add to troubleshooting.md: {sorted(missing)}"
