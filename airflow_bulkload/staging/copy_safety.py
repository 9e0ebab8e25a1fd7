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

#: why a CR alone outside quoted values is refused
CR_ALONE = (
    "a line end of CR alone (or a CR inside an unquoted value), which PostgreSQL's COPY reads as "
    "a line end or refuses (and MySQL's LOAD DATA keeps in the value)"
)


@dataclass(frozen=True)
class Misread:
    """Where the stream stops reading as staging reads it: the line (from 1) and why."""

    line: int
    reason: str
    sample: bytes


class CopySafety:
    """Checks blocks of whole lines, in order, for what ``COPY`` would read differently.

    Lines are counted across blocks: a refusal names the line of the stream (from 1) where the
    record it is in starts.
    """

    def __init__(self, quote: str, delimiter: str) -> None:
        q = re.escape(quote.encode())
        d = re.escape(delimiter.encode())
        inside = rb"[^" + q + rb"]*+(?:" + q + q + rb"[^" + q + rb"]*+)*+"  # a quoted body
        # an unquoted value holds no quote, and a CR only as part of a CRLF line end
        field = rb"(?:" + q + inside + q + rb"|[^" + q + d + rb"\r\n]*+)"
        end = rb"\r?(?:\n|\Z)"
        rest = rb"(?:" + d + field + rb")*+" + end  # the record after its first value
        # values of a record up to its last, which is still open at the block's end
        open_values = rb"(?:" + field + d + rb")*+" + q + inside + rb"\Z"
        record = rb"(?!\\\.(?:\r|\n|\Z))" + field + rest
        # the records of a block that starts between records, up to the first that is not
        self._records = re.compile(rb"(?:" + record + rb")*+")
        self._bare_cr = re.compile(rb"\r(?!\n)")
        # the end of a value a previous block left open, then the rest of its record (which
        # may open another value that the block's end leaves open)
        self._closing = re.compile(
            inside
            + rb"(?P<closed>"
            + q
            + rb"(?:(?P<reopened>"
            + d
            + open_values
            + rb")|"
            + rest
            + rb"))?"
        )
        # a block's last record, open at the block's end (a quoted value holds a line end)
        self._open_tail = re.compile(open_values)
        self._backslash_dot = re.compile(rb"\\\.(?:\r|\n|\Z)")
        self._quote = quote.encode()
        self._in_quote = False
        self._lines = 0  # line ends of the blocks checked so far
        self._open_record_line = 0  # where the record left open by the last block starts

    def _needed(self, block: bytes) -> bool:
        """Whether ``block`` can hold anything :meth:`check` refuses (else it passes unmatched).

        Blocks without a quote, a backslash-dot or a CR, outside a quoted value, cannot.
        """
        return (
            self._in_quote
            or self._quote in block
            or b"\r" in block
            # a one-byte search runs at memory speed; the two-byte one only where a backslash is
            or (b"\\" in block and b"\\." in block)
        )

    @property
    def lines(self) -> int:
        """The line ends of the blocks seen so far."""
        return self._lines

    def check(self, block: bytes) -> Misread | None:
        """The first place in ``block`` that ``COPY`` reads differently, else ``None``.

        A block that cannot hold one (no quote, backslash-dot or CR) is only counted.
        """
        if not self._needed(block):
            self._lines += block.count(b"\n")
            return None
        try:
            misread = self._check(block)
            if misread is not None and self._bare_cr.search(block):
                misread = self._blame_cr(block, misread)
            return misread
        finally:
            self._lines += block.count(b"\n")

    def _blame_cr(self, block: bytes, misread: Misread) -> Misread:
        """Name a CR alone as the cause when the block reads further without it."""
        state = (self._in_quote, self._open_record_line)
        try:
            without = self._check(self._bare_cr.sub(b" ", block))
        finally:
            self._in_quote, self._open_record_line = state
        if without is not None and without.line <= misread.line:
            return misread
        return Misread(misread.line, CR_ALONE, misread.sample)

    def _check(self, block: bytes) -> Misread | None:
        start = 0
        if self._in_quote:
            closing = self._closing.match(block)
            assert closing is not None  # the body alone always matches
            if closing.group("reopened") is not None:
                return None  # another value of the same record is open at the block's end
            if closing.group("closed") is None:
                if closing.end() == len(block):
                    return None  # still inside the value
                return self._misread(block, 0, self._open_record_line)  # text after the quote
            self._in_quote = False
            start = closing.end()
        records = self._records.match(block, start)
        assert records is not None  # no records at all is a match too
        at = records.end()
        if at == len(block):
            return None
        if self._open_tail.match(block, at) is not None:
            self._in_quote = True
            self._open_record_line = self._line_at(block, at)
            return None
        return self._misread(block, at, self._line_at(block, at))

    def _line_at(self, block: bytes, at: int) -> int:
        return self._lines + block.count(b"\n", 0, at) + 1

    def _misread(self, block: bytes, at: int, line: int) -> Misread:
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
                "PostgreSQL's COPY and MySQL's LOAD DATA read as the start or the rest of a "
                "quoted value (records merge, or quotes go)"
            )
        return Misread(line, reason, sample)
