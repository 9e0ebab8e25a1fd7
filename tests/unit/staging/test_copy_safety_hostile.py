r"""Hostile probes of CopySafety and the direct reader that feeds it.

Every test that fails here is a break found by a hostile review: a false refusal of CSV that
PostgreSQL's COPY and DuckDB read alike, a misread of COPY that passes, a line number that
misleads, or a cost that grows faster than the input. The passing tests are probes kept as
guards. Blocks are cut as ``_DirectReader._next_lines`` cuts them: whole physical lines.

PostgreSQL facts relied on (src/backend/commands/copyfromparse.c, ``CopyReadLineText``): the
line end style (LF, CRLF or CR alone) is taken from the first line of each COPY stream; ``\.``
as the first characters of a line, followed by the line end (or by ``\r``/``\n`` while the style
is not known yet, i.e. on the stream's first line), ends the data, and what follows is ignored.
"""

from __future__ import annotations

import csv
import io
import random

import pytest

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.staging.copy_safety import CopySafety
from airflow_bulkload.staging.direct import _DirectReader
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat

#: the size the PostgreSQL loader reads a direct chunk in (COPY_BLOCK_BYTES)
COPY_BLOCK = 128 * 1024


class Trickle(io.RawIOBase):
    r"""A stream that hands out at most ``step`` bytes a read, as a network stream may."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = io.BytesIO(data)
        self._step = step

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        return self._data.read(min(self._step, size if size and size > 0 else self._step))


def spec(delimiter: str = ",", header: bool = False) -> ChunkSpec:
    return ChunkSpec(
        uri="s3://in/a.csv",
        checksum="etag:x:0-0",
        file_format=FileFormat(header=False, delimiter=delimiter).to_dict(),
        columns=["id", "note"],
        ledger_key="staging/x/direct-00000",
        skip_header=header,
    )


def read_all(data: bytes, step: int, delimiter: str = ",") -> bytes:
    reader = _DirectReader(Trickle(data, step), spec(delimiter))  # type: ignore[arg-type]
    out = b""
    while block := reader.read(step):
        out += block
    return out


def line_blocks(data: bytes, size: int) -> list[bytes]:
    r"""``data`` cut as ``_next_lines`` cuts it: reads of ``size`` bytes, whole lines handed on."""
    blocks: list[bytes] = []
    pos, pending = 0, b""
    while True:
        block = pending or data[pos : pos + size]
        if not pending:
            pos += len(block)
        pending = b""
        if not block:
            return blocks
        while not block.endswith(b"\n"):
            at = block.rfind(b"\n")
            if at >= 0:
                pending, block = block[at + 1 :], block[: at + 1]
                break
            more = data[pos : pos + size]
            pos += len(more)
            if not more:
                break
            block += more
        blocks.append(block)


def first_refusal(data: bytes, size: int, delimiter: str = ","):  # type: ignore[no-untyped-def]
    safety = CopySafety('"', delimiter)
    for index, block in enumerate(line_blocks(data, size)):
        misread = safety.check(block)
        if misread is not None:
            return index, misread
    return None


def csv_bytes(rows: list[list[object]], **fmt: object) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, **fmt).writerows(rows)  # type: ignore[arg-type]
    return buf.getvalue().encode()


# --- BREAK 1: a block that starts inside one quoted value and ends inside another --------------


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_two_multiline_values_of_one_record_pass_at_every_block_size(size: int) -> None:
    r"""Input: ``"a\nb","c\nd"\n`` (csv.writer output: one record, two values with a line end).
    Blocks ``"a\n`` | ``b","c\n`` | ``d"\n``: the middle block starts inside the first value and
    ends inside the second. Happened: refused at the middle block ("a quote inside an unquoted
    value"), because ``_closing`` demands that the record closed by the block also ends in it
    (``rest`` must reach a line end), and its possessive ``(?:d field)*+`` eats ``,`` plus an
    empty unquoted field before the opening quote. Should: pass (COPY and DuckDB read one record
    ['a\nb', 'c\nd']); the block should leave the quote state open, as ``_open_tail`` does."""
    assert first_refusal(b'"a\nb","c\nd"\n', size) is None


def test_a_wide_record_with_two_multiline_texts_passes_in_copy_sized_blocks() -> None:
    r"""Input: csv.writer rows [id, html body (~114 KB, many lines), text body (~114 KB, many
    lines), 'ok'], read by ``_DirectReader`` in 128 KB reads as the PostgreSQL loader reads it.
    Happened: ChunkLoadError "a quote inside an unquoted value" at a line inside the text body
    (a 128 KB block starts inside the html value and ends inside the text value). Should: load
    (it is plain RFC 4180 CSV both readers read alike; e-mail or CMS exports look like this)."""
    para = "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n"
    rows: list[list[object]] = [
        [i, "<html>\n" + para * 2000 + "</html>", para * 2000, "ok"] for i in range(3)
    ]
    data = csv_bytes(rows)
    assert read_all(data, COPY_BLOCK) == data


POOL = [
    "", "a", "1", ",", "\t", ";", "|", '"', '""', '"""', 'a"b', '"a', 'a"', "x\ny", "x\r\ny",
    "x\ry", "\n", "\r\n", "\r", "é漢字🙂", "\\.", "\\", ".", " ", "  a  ", '"\n"', "NULL",
    "\\.\n", "\n\\.\n", "\n\\.", "\\.\r\n", "a,b;c|d\te", "\n\n", "\r\n\r\n", '",\n"', "\u2028",
]  # fmt: skip


def random_csv(rng: random.Random, *, one_multiline: bool) -> tuple[bytes, str]:
    delimiter = rng.choice([",", "\t", ";", "|"])
    quoting = rng.choice([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC])
    ncols = rng.randint(1, 4)
    rows: list[list[object]] = []
    for _ in range(rng.randint(1, 8)):
        row: list[object] = [rng.choice(POOL) for _ in range(ncols)]
        if quoting == csv.QUOTE_NONNUMERIC and rng.random() < 0.3:
            row[0] = rng.choice([1, 2.5, -3])
        if one_multiline:  # at most one value of the record holds a line end
            seen = False
            for n, value in enumerate(row):
                if isinstance(value, str) and ("\n" in value or "\r" in value):
                    row[n] = value if not seen else "x"
                    seen = True
        rows.append(row)
    data = csv_bytes(
        rows, delimiter=delimiter, quoting=quoting, lineterminator=rng.choice(["\r\n", "\n"])
    )
    return data, delimiter


#: refused on purpose: a line that is \. alone, and a CR alone outside quotes (csv.writer with
#: lineterminator "\n" leaves a value's CR unquoted; COPY reads it as a line end or refuses it)
INTENDED = ("a line that is", "a line end of CR alone")


def bare_cr_outside_quotes(data: bytes) -> bool:
    """Whether a CR that is not part of a CRLF stands outside quoted values (refused on purpose,
    whichever cause the message names when a quote is at fault in the same record too)."""
    quotes = 0
    for at, byte in enumerate(data):
        if byte == ord('"'):
            quotes += 1
        elif byte == ord("\r") and data[at + 1 : at + 2] != b"\n" and quotes % 2 == 0:
            return True
    return False


def refusals_of_csv_module_output(seed: int, trials: int, *, one_multiline: bool) -> list[bytes]:
    rng = random.Random(seed)
    refused: list[bytes] = []
    for _ in range(trials):
        data, delimiter = random_csv(rng, one_multiline=one_multiline)
        for size in (1, 2, 3, 7, 64, 1 << 20):
            found = first_refusal(data, size, delimiter)
            if (
                found is not None
                and not found[1].reason.startswith(INTENDED)
                and not bare_cr_outside_quotes(data)
            ):
                refused.append(data)
                break
    return refused


def test_csv_module_output_passes_at_every_block_size() -> None:
    r"""Input: 600 random csv.writer outputs (QUOTE_MINIMAL/ALL/NONNUMERIC; delimiters , TAB ; |;
    CRLF and LF; values with delimiters, quotes, \n, \r\n, \r, unicode, '\\.', only quotes),
    cut at block sizes 1, 2, 3, 7, 64 and 1 MB. Happened: about one in six refused, every one a
    record with two values holding line ends (break 1). Should: none refused but a line that is
    ``\.`` alone, which is refused on purpose."""
    refused = refusals_of_csv_module_output(0, 600, one_multiline=False)
    assert refused == [], f"{len(refused)} refused, e.g. {refused[0]!r}"


def test_csv_module_output_with_one_multiline_value_a_record_passes() -> None:
    r"""Probe (passes): the same fuzz, but at most one value of a record holds a line end:
    nothing is refused but ``\.`` alone (also with blocks of 1 byte: every boundary)."""
    assert refusals_of_csv_module_output(1, 1500, one_multiline=True) == []


# --- BREAK 2: \. with a CR line end, which COPY takes for the end of the data ------------------


@pytest.mark.parametrize(
    ("data", "copy_reads"),
    [
        # a headerless object that ends its lines with CR alone (planning checks CR-only line
        # ends in the header line only): COPY takes CR for the line end from line 1
        (b"1,a\r\\.\r2,b\r", "1 record (1,a); 2,b is ignored"),
        # a first line ending in a CR alone sets COPY's line end to CR for the whole stream
        (b"1,a\r\\.\r\n2,b\n", "1 record (1,a); 2,b is ignored"),
        # the first line of a chunk, where COPY does not know the line end yet: \. and a CR
        (b"\\.\r2,b\n3,c\n", "no record at all"),
    ],
)
def test_backslash_dot_ended_by_a_cr_is_refused(data: bytes, copy_reads: str) -> None:
    r"""Input: ``\.`` at the start of a line (for COPY) ended by a CR, in the first line of a
    chunk's COPY stream or after a first line ended by CR alone. Happened: passes (CopySafety
    counts a CR outside quotes as a character of the value, and looks for ``\.`` only before
    ``\r?\n`` or the end). PostgreSQL's COPY: takes that ``\.`` for the end of the data, so it
    reads what ``copy_reads`` says; Python's csv (and DuckDB, for which a CR alone ends a line) read every
    record. Should: refuse, like ``\.`` before LF/CRLF (or refuse a CR outside quotes)."""
    for step in (1, 3, 64, 1 << 20):
        with pytest.raises(ChunkLoadError):
            read_all(data, step)


# --- BREAK 3: line numbers --------------------------------------------------------------------


def test_the_line_named_counts_the_empty_lines_dropped_before_it() -> None:
    r"""Input: ``1,a\n\n\n\n2,b"\n`` (three empty lines, then a stray quote on line 5).
    Happened: ChunkLoadError names line 2 (the reader counts lines after dropping empty ones).
    Should: name line 5, the object's line (``_refuse_misread`` says it gives the object's line),
    or the user looks at the wrong record."""
    with pytest.raises(ChunkLoadError) as failure:
        read_all(b'1,a\n\n\n\n2,b"\n', 64)
    assert failure.value.line == 5


def test_the_line_named_does_not_depend_on_the_block_size() -> None:
    r"""Input: ``1,ok\n2,"a\nb\nc\nd"x\n3,z\n`` (text after the closing quote of a value over
    lines 2-5). Happened: line 5 with small reads, line 2 with reads of 64 bytes or more (a
    block-relative record start versus the block's first line). Should: one line whatever the
    read size (the direct reader's own tests demand this)."""
    data = b'1,ok\n2,"a\nb\nc\nd"x\n3,z\n'
    lines = set()
    for step in (1, 3, 8, 64, 1 << 20):
        with pytest.raises(ChunkLoadError) as failure:
            read_all(data, step)
        lines.add(failure.value.line)
    assert len(lines) == 1, lines


# --- BREAK 4: a long line ------------------------------------------------------------------


def test_a_line_longer_than_a_record_may_be_is_refused_not_read_whole() -> None:
    r"""Input: one 32 MB line (``1,xxxx...\n``; e.g. a headerless object with CR-alone line ends
    is one line for ``_next_lines``), read in 128 KB reads. Happened: ``_next_lines`` grew
    ``data += more`` and searched the whole of it each read (quadratic: 48 MB took 8.6 s here),
    and kept no MAX_RECORD_BYTES bound, so an object without LF was read whole into memory.
    Should: refuse a line longer than MAX_RECORD_BYTES, naming it (and read shorter ones)."""
    from airflow_bulkload.exceptions import ChunkLoadError
    from airflow_bulkload.staging.normalize import MAX_RECORD_BYTES

    data = b"1," + b"x" * (32 * 2**20) + b"\n"
    reader = _DirectReader(io.BytesIO(data), spec())  # type: ignore[arg-type]
    with pytest.raises(ChunkLoadError, match="a line longer than") as refused:
        while reader.read(COPY_BLOCK):
            pass
    assert refused.value.line == 1
    fits = b"1," + b"x" * (MAX_RECORD_BYTES // 2) + b"\n2,y\n"
    assert read_all(fits, COPY_BLOCK) == fits  # read in steps of one COPY block


# --- probes that pass -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b'1,"a\n"\n\\.\n2,b\n',  # \. right after a value over two lines
        b"1,a\r\n\\.\r\n2,b\r\n",  # CRLF
        b"1,a\n\\.",  # the last line, without its line end
        b"1,a\n\\.\r",  # the last line, a CR and no LF
        b'1,"x\ny"\nz,"w"\n\\.\n',
        b'1,"a\nb\nc"x,2\n',  # text after a closing quote, the value over three lines
        b' "abc",x\n',  # a space before the opening quote
        b'"abc" ,x\n',  # a space after the closing quote
        b'1,ab"\n2,"x"\n',  # a quote at the end of an unquoted value
        b'1,"a""\n2,b\n',  # a value that never closes (the quote count at the end)
    ],
)
def test_what_copy_reads_otherwise_is_refused_at_every_block_size(data: bytes) -> None:
    r"""Probe (passes for every read size): the misreads the module is for are refused."""
    for step in (1, 2, 3, 5, 8, 64, 1 << 20):
        with pytest.raises(ChunkLoadError):
            read_all(data, step)


@pytest.mark.parametrize("step", [7, 4096, COPY_BLOCK])
def test_values_over_200_kb_pass(step: int) -> None:
    r"""Probe (passes): 250 KB values, quoted with doubled quotes, delimiters and line ends in
    them, and unquoted, in one record with short values around them."""
    rng = random.Random(step)
    big = "".join(
        rng.choice(['"', '""', ",", "\n", "\r\n", "abc", "é", "\\."]) for _ in range(60000)
    )
    rows: list[list[object]] = [[1, big, "x"], [2, "y" * 250_000, ""], [3, "", big[::-1]]]
    data = csv_bytes(rows)
    assert read_all(data, step) == data


@pytest.mark.parametrize(
    "make",
    [
        lambda n: b'"' * (n - n % 2) + b"\n",  # an even run of quotes
        lambda n: b'"' * (n | 1) + b"\n",  # an odd run: opens a value
        lambda n: b"," * n + b'a"\n',  # a run of delimiters, then a stray quote
        lambda n: b'"' + b"x" * n + b'"y\n',  # a long value, text after its closing quote
        lambda n: b"x" * n + b'"\n',  # a long unquoted value, a quote at its end
        lambda n: b'"",' * (n // 3) + b"\n",
        lambda n: b'"' + b"x\n" * (n // 2),  # open to the end
    ],
)
def test_adversarial_input_costs_no_backtracking(make) -> None:  # type: ignore[no-untyped-def]
    r"""Probe (passes): 4 MB of adversarial bytes in one block are judged (measured by hand:
    linear from 1 to 10 MB, no backtracking blow-up)."""
    data = make(4 * 2**20)
    CopySafety('"', ",").check(data)
