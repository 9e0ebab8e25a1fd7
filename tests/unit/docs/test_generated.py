"""The generated parts of the pre-flight page are fresh, and the page covers every rule id."""

from __future__ import annotations

import re

from scripts import gen_docs
from tests.unit.docs.conftest import DOCS, REPO

PREFLIGHT = DOCS / "preflight.md"


def test_generated_files_are_fresh() -> None:
    for path, text in gen_docs.outputs().items():
        assert path.is_file() and path.read_text() == text, (
            f"{path.relative_to(REPO)} is stale: run .venv/bin/python scripts/gen_docs.py"
        )


def test_rule_ids_are_found_in_the_code() -> None:
    rules = {use.rule for use in gen_docs.rule_uses()}
    assert {"no_primary_key", "storage_iops", "s3_role", "doublewrite_off"} <= rules
    assert all(use.evidence for use in gen_docs.rule_uses()), "every rule cites evidence"


def test_every_rule_id_has_a_row_on_the_preflight_page() -> None:
    text = PREFLIGHT.read_text()
    listed = set(re.findall(r"^\| \[`(\w+)`\]\(#rule-[\w-]+\) \|", text, re.MULTILINE))
    rules = {use.rule for use in gen_docs.rule_uses()}
    assert rules - listed == set(), f"rules missing from {PREFLIGHT.name}: {rules - listed}"
    assert listed - rules == set(), f"rules on the page the code no longer has: {listed - rules}"


def test_preflight_page_includes_the_generated_tables() -> None:
    text = PREFLIGHT.read_text()
    for path in gen_docs.outputs():
        assert f'--8<-- "{path.relative_to(REPO).as_posix()}"' in text


def test_every_evidence_item_is_cited_by_some_rule_or_anti_pattern() -> None:
    from airflow_bulkload.advice import evidence as ev
    from airflow_bulkload.advice.anti_patterns import ANTI_PATTERNS

    cited = {name for use in gen_docs.rule_uses() for name in use.evidence}
    items = {n for n, v in vars(ev).items() if isinstance(v, ev.Evidence)}
    by_anti_pattern = {n for n in items if getattr(ev, n) in [a.evidence for a in ANTI_PATTERNS]}
    assert items - cited - by_anti_pattern == set()
