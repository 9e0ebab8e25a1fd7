"""The IAM policies in docs/iam are valid JSON and least-privilege."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.docs.conftest import DOCS, pages, snippet_paths

POLICIES = sorted((DOCS / "iam").glob("*.json"))
#: what a role the database assumes may do: read staged chunks (and decrypt SSE-KMS ones)
READ_ACTIONS = {"s3:GetObject", "s3:GetObjectVersion", "s3:ListBucket", "kms:Decrypt"}


def _statements(doc: dict) -> list[dict]:
    statements = doc["Statement"]
    return statements if isinstance(statements, list) else [statements]


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def test_there_are_policies() -> None:
    names = {p.name for p in POLICIES}
    assert any("trust" in n for n in names) and any("trust" not in n for n in names)


@pytest.mark.parametrize("path", POLICIES, ids=lambda p: p.name)
def test_policy_is_valid_and_narrow(path: Path) -> None:
    doc = json.loads(path.read_text())
    assert doc["Version"] == "2012-10-17"
    for statement in _statements(doc):
        assert statement["Effect"] == "Allow"
        actions = _as_list(statement["Action"])
        assert all("*" not in a for a in actions), f"{path.name}: wildcard action {actions}"
        if "trust" in path.name:
            assert actions == ["sts:AssumeRole"]
            assert statement["Principal"] == {"Service": "rds.amazonaws.com"}
            assert "Condition" in statement, "scope the trust to your account/DB (confused deputy)"
            continue
        assert set(actions) <= READ_ACTIONS, f"{path.name}: more than read access: {actions}"
        for resource in _as_list(statement["Resource"]):
            assert resource != "*" and resource.startswith("arn:aws:"), resource


def test_every_policy_is_shown_on_a_page() -> None:
    shown = {p for page in pages() for p in snippet_paths(page.read_text())}
    for path in POLICIES:
        assert f"docs/iam/{path.name}" in shown
