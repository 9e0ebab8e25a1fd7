r"""Which stored CSV bytes PostgreSQL's ``COPY ... CSV`` reads as staging reads them.

Input loaded as stored reaches ``COPY`` byte for byte, and ``COPY`` reads a few things in CSV
that staging (DuckDB) reads as text:

- a quote inside an unquoted value (``Monitor 27",2``, ``x""``): ``COPY`` starts a quoted part
  there and can merge records, or drop the quotes;
- text after a closing quote (``"abc"def``): ``COPY`` joins the two parts;
- a line that is ``\.`` alone: ``COPY FROM STDIN`` takes it for the end of the data and ignores
  every record after it.

:class:`CopySafety` checks each block of whole lines against the CSV grammar both read alike
(every value either unquoted and free of quotes, or quoted with its quotes doubled inside), with
one regular expression, so a block costs one C-speed match; it carries across blocks whether the
last one ended inside a quoted value. A block that breaks the grammar fails its chunk before
anything commits, naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Misread:
    """Where a block stops reading as staging reads it: the line (1-based) and why."""

    line: int
    reason: str
    sample: bytes


class CopySafety:
    """Checks blocks of whole lines, in order, for what ``COPY`` would read differently."""

    def __init__(self, quote: str, delimiter: str) -> None:
        q = re.escape(quote.encode())
        d = re.escape(delimiter.encode())
        inside = rb"(?:[^" + q + rb"]|" + q + q + rb")*+"  # a quoted value's body
        field = rb"(?:" + q + inside + q + rb"|[^" + q + d + rb"\n]*+)"
        rest = rb"(?:" + d + field + rb")*+\r?(?:\n|\Z)"  # the record after its first value
        record = rb"(?!\\\.\r?(?:\n|\Z))" + field + rest
        self._in_quote = False
        # the records of a block that starts between records, up to the first that is not
        self._records = re.compile(rb"(?:" + record + rb")*+")
        # the end of a value a previous block left open, then the rest of its record
        self._closing = re.compile(inside + rb"(?P<closed>" + q + rest + rb")?")
        # a block's last record, open at the block's end (a quoted value holds a line end)
        self._open_tail = re.compile(rb"(?:" + field + d + rb")*+" + q + inside + rb"\Z")
        self._backslash_dot = re.compile(rb"\\\.\r?(?:\n|\Z)")
        self._quote = quote.encode()

    def needed(self, block: bytes) -> bool:
        """Whether ``block`` can hold anything :meth:`check` refuses (quote-free blocks pass)."""
        return self._in_quote or self._quote in block or b"\\." in block

    def check(self, block: bytes) -> Misread | None:
        """The first place in ``block`` that ``COPY`` reads differently, else ``None``."""
        start = 0
        if self._in_quote:
            closing = self._closing.match(block)
            assert closing is not None  # the body alone always matches
            if closing.group("closed") is None:
                if closing.end() == len(block):
                    return None  # still inside the value
                return self._misread(block, 0)  # text after the closing quote
            self._in_quote = False
            start = closing.end()
        records = self._records.match(block, start)
        assert records is not None  # no records at all is a match too
        end = records.end()
        if end == len(block):
            return None
        tail = self._open_tail.match(block, end)
        if tail is not None:
            self._in_quote = True
            return None
        return self._misread(block, end)

    def _misread(self, block: bytes, at: int) -> Misread:
        line_end = block.find(b"\n", at)
        sample = block[at : line_end if line_end >= 0 else len(block)][:80]
        if self._backslash_dot.match(block, at):
            reason = (
                "a line that is \\. alone, which PostgreSQL's COPY takes for the end of the data "
                "(every record after it would be left out)"
            )
        else:
            reason = (
                "a quote inside an unquoted value, or text after a closing quote, which "
                "PostgreSQL's COPY reads as the start or the rest of a quoted value (records "
                "merge, or quotes go)"
            )
        return Misread(block[:at].count(b"\n") + 1, reason, sample)
