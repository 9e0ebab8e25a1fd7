"""Helpers for the docs tests: the repository's pages and fenced code blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs"
EXAMPLES = DOCS / "examples"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
SNIPPET = re.compile(r'^\s*-{1,}8<-{1,}\s+"(?P<path>[^"]+)"\s*$')


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    text: str

    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """The Markdown pages of the site (generated includes are not pages)."""
    return sorted(p for p in DOCS.rglob("*.md") if "_generated" not in p.parts)


def code_blocks(path: Path) -> list[Block]:
    """Every fenced code block of a Markdown file, with its language and first line number."""
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, indent = match["fence"], match["indent"]
        lang = match["info"].strip().split(" ")[0].lstrip("{.").rstrip("}").lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        blocks.append(Block(path, i + 1, lang, "\n".join(body)))
        i = j + 1
    return blocks


def snippet_paths(text: str) -> list[str]:
    """Paths of ``--8<-- "path"`` includes in a block or page."""
    return [m["path"] for line in text.splitlines() if (m := SNIPPET.match(line))]
