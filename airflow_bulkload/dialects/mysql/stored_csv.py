r"""CSV as stored, rewritten in flight into the form ``LOAD DATA`` reads as staging reads it.

A direct chunk (input loaded as stored, see :mod:`~airflow_bulkload.staging.direct`) reaches the
loader byte for byte. PostgreSQL's ``COPY ... CSV`` reads it as staging does; MySQL's
``LOAD DATA ... FIELDS OPTIONALLY ENCLOSED BY '"' ESCAPED BY ''`` does not, in three places:

- **NULL.** CSV's NULL is an *unquoted* empty field (or the format's ``null`` string, unquoted),
  and a quoted ``""`` is an empty string. ``LOAD DATA`` reads both as the same empty value, so a
  ``NULLIF`` mapping would make every empty string NULL.
- **The word NULL.** ``LOAD DATA`` reads an unquoted ``NULL`` field as SQL NULL; CSV (and
  staging) read it as the text ``NULL``.
- **CRLF.** With ``LINES TERMINATED BY '\n'`` a CR before the line end stays in the last value.

:class:`StoredCsvStream` rewrites each block, as it streams, into staging's own MySQL form
(:data:`~airflow_bulkload.staging.planning.STAGED_FORMAT`'s NULL): an unquoted field that is
the NULL string becomes the word ``NULL``, an unquoted word ``NULL`` becomes ``"NULL"``, and a
CRLF line end outside quoted values becomes LF. Quoted values pass untouched (a CRLF in one is
data). The blocks come from the direct reader, which has already refused what no CSV reader
reads alike (a quote inside an unquoted value, text after a closing quote, a CR alone): so every
quote in a block opens or closes a quoted value, or is one half of a doubled quote, and the
quotes before a byte tell whether it is inside one.

**How, at C speed.** A block is split at its quotes; the pieces alternate between outside and
inside quoted values (a doubled quote is a close and a reopen with nothing between). The outside
pieces are joined with one quote between each two, a marker of "a quoted value is here" that no
substitution matches; the substitutions run over that text, and the rewritten outside pieces are
put back between the untouched inside ones. A block without quotes (most CSV) is one
substitution pass; a block with quotes is rewritten in 64 KB slices, each cut at a quote.
Memory: a few copies of one block.

**Latin-1.** MySQL's ``latin1`` is Windows-1252: bytes 0x80-0x9F (C1 controls in ISO-8859-1)
would be stored as other characters, so LATIN1 input holding one fails before commit, as
staging refuses it.
"""

from __future__ import annotations

import re
from dataclasses import replace

from airflow_bulkload.exceptions import ChunkLoadError, InvalidFileFormatError
from airflow_bulkload.s3io import READ_BUFFER_BYTES, ChunkStream
from airflow_bulkload.staging.manifest import FileFormat

#: the NULL marker ``LOAD DATA`` reads itself (unquoted) when fields may be enclosed
NATIVE_NULL = "NULL"
#: stands in for a quote added around a word NULL until the block's pieces are put back (the
#: direct reader refuses NUL bytes, so none is in the data)
_ADDED_QUOTE = b"\0"
#: the size of the slices a block holding quotes is rewritten in (each cut at a quote)
_SLICE_BYTES = 64 * 1024
#: bytes that are C1 controls in ISO-8859-1 but letters and signs in MySQL's latin1 (cp1252)
_C1_CONTROLS = re.compile(rb"[\x80-\x9f]")


class StoredCsvRewriter:
    """Rewrites blocks of whole lines, in order, into ``LOAD DATA``'s reading of CSV.

    Whether the stream is inside a quoted value carries across blocks. A block that does not end
    in a line end is the stream's last (the direct reader hands out whole lines).
    """

    def __init__(self, fmt: FileFormat) -> None:
        encoding = fmt.python_encoding
        self._quote = fmt.quote.encode(encoding)
        delimiter = fmt.delimiter.encode(encoding)
        null = fmt.effective_null.encode(encoding)
        if self._quote in null or delimiter in null or (null and delimiter == self._quote):
            raise InvalidFileFormatError(
                f"the NULL string {fmt.effective_null!r} holds the delimiter or the quote: such "
                "input cannot be loaded as stored into MySQL (stage it: direct=False)"
            )
        d = re.escape(delimiter)
        # a field starts after a delimiter or line end (one class when the delimiter is a byte)
        starts = (
            rb"(?<=[" + d + rb"\n])" if len(delimiter) == 1 else rb"(?:(?<=" + d + rb")|(?<=\n))"
        )
        ends = rb"(?=" + d + rb"|\n)"
        self._delimiter = delimiter
        # an empty field lies between two separators: plain replaces run far faster than a
        # zero-width pattern
        self._empty_null = not null
        native = NATIVE_NULL.encode(encoding)
        # with NULL as the word NULL, LOAD DATA reads the input's NULLs as they are
        self._null = (
            None if null == native or not null else re.compile(starts + re.escape(null) + ends)
        )
        self._word = None if null == native else re.compile(starts + re.escape(native) + ends)
        self._quoted_word = _ADDED_QUOTE + native + _ADDED_QUOTE
        self._native = native
        self._in_quote = False
        self._c1 = _C1_CONTROLS if encoding == "latin-1" else None

    def rewrite(self, block: bytes) -> bytes:
        """``block`` as ``LOAD DATA`` must read it (whole lines; the last may lack its end)."""
        if not block:
            return block
        if self._c1 is not None and (c1 := self._c1.search(block)):
            raise InvalidFileFormatError(
                f"byte 0x{block[c1.start()]:02X} in LATIN1 input: a C1 control character in "
                "ISO-8859-1, which MySQL's latin1 (Windows-1252) would store as another "
                "character (staging refuses it too). Re-encode the input as UTF-8"
            )
        last_line = not block.endswith(b"\n")
        if not self._in_quote and self._quote not in block:
            return self._restore(self._outside(block, line_start=True, at_end=last_line))
        # slices that start at a quote, so no substitution spans two; each splits into at most
        # a slice's worth of pieces, which bounds the memory of a block dense with quotes
        out, start, size = [], 0, len(block)
        while start < size:
            cut = (
                block.find(self._quote, start + _SLICE_BYTES) if start + _SLICE_BYTES < size else -1
            )
            end = size if cut < 0 else cut
            out.append(self._quoted(block[start:end], start == 0, last_line and end == size))
            start = end
        return self._restore(b"".join(out))

    def _quoted(self, text: bytes, block_start: bool, stream_end: bool) -> bytes:
        """A slice holding quotes: its outside pieces rewritten, its quoted values as they are."""
        pieces = text.split(self._quote)
        if len(pieces) == 1 and self._in_quote:
            return text  # all of it inside one quoted value
        first_outside = 1 if self._in_quote else 0
        ends_outside = (len(pieces) - 1 + first_outside) % 2 == 0
        # the outside pieces, each quoted value between them marked by one quote
        rewritten = self._outside(
            self._quote.join(pieces[first_outside::2]),
            line_start=block_start and not self._in_quote,
            at_end=ends_outside and stream_end,
        ).split(self._quote)
        pieces[first_outside::2] = rewritten
        self._in_quote = not ends_outside
        return self._quote.join(pieces)

    def _restore(self, text: bytes) -> bytes:
        """The quotes added around words NULL, put in."""
        return text.replace(_ADDED_QUOTE, self._quote) if _ADDED_QUOTE in text else text

    def _outside(self, text: bytes, *, line_start: bool, at_end: bool) -> bytes:
        """The substitutions, over text whose quoted values are blanked to their quotes."""
        if line_start:
            text = b"\n" + text
        if at_end:
            text += b"\n"
        if b"\r" in text:
            text = text.replace(b"\r\n", b"\n")  # the reader refuses a CR alone
        if self._word is not None and self._native in text:
            text = self._word.sub(self._quoted_word, text)
        if self._null is not None:
            text = self._null.sub(self._native, text)
        elif self._empty_null:
            d, native = self._delimiter, self._native
            twice = d + d
            if twice in text:  # twice: each pass fills every other empty field of a run
                text = text.replace(twice, d + native + d).replace(twice, d + native + d)
            text = text.replace(b"\n" + d, b"\n" + native + d).replace(
                d + b"\n", d + native + b"\n"
            )
        return text[1 if line_start else 0 : -1 if at_end else None]


class StoredCsvStream(ChunkStream):
    """A direct chunk's stream as ``LOAD DATA`` must read it (see :class:`StoredCsvRewriter`).

    :attr:`file_format` is the format to load it with: the input's, with NULL as the word
    ``NULL``. Bytes counted are the stored stream's, not the rewritten ones.
    """

    def __init__(self, stored: ChunkStream, fmt: FileFormat) -> None:
        super().__init__(stored, stored.source)  # type: ignore[arg-type]
        self._source_stream = stored
        self._rewriter = StoredCsvRewriter(fmt)
        self.file_format = replace(fmt, null=NATIVE_NULL)

    def read(self, size: int = READ_BUFFER_BYTES) -> bytes:
        try:
            return self._rewriter.rewrite(self._source_stream.read(size))
        except InvalidFileFormatError as exc:
            raise ChunkLoadError(
                self.source, str(exc), expected="text in the declared encoding"
            ) from exc
