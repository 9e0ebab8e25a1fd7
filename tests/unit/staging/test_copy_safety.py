"""CopySafety: which stored CSV blocks PostgreSQL's COPY reads as staging does."""

from __future__ import annotations

import pytest

from airflow_bulkload.staging.copy_safety import CopySafety


def first_misread(blocks: list[bytes], delimiter: str = ",") -> tuple[int, int, str] | None:
    """(block index, line in that block, reason's start) of the first refusal, else None."""
    safety = CopySafety('"', delimiter)
    for index, block in enumerate(blocks):
        misread = safety.check(block)
        if misread is not None:
            return index, misread.line, misread.reason.split(",")[0]
    return None


@pytest.mark.parametrize(
    "blocks",
    [
        [b"1,a,2\n2,b,3\n"],
        [b'1,"a,b",2\n2,"he said ""hi""",3\n'],
        [b'1,"",2\n"a",b\n'],
        [b'1,"a"\r\n2,"b"\r\n'],
        [b'1,"a",2'],  # the last line without its line end
        [b"\\.,x\n"],  # \. as a value among others is data
        [b'1,"line1\n', b'\\.\nline3",2\n3,x,4\n'],  # \. inside a quoted value is data
        [b'1,"x\n', b"more\n", b'end",2\n'],  # a quoted value over three blocks
    ],
)
def test_what_copy_reads_as_staging_does_passes(blocks: list[bytes]) -> None:
    assert first_misread(blocks) is None


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [
        ([b'1,Monitor 27",2\n2,Monitor 32",4\n'], (0, 1, "a quote inside an unquoted value")),
        ([b'1,ok,2\n1,5" pipe,2\n'], (0, 2, "a quote inside an unquoted value")),
        ([b'1,x"",2\n'], (0, 1, "a quote inside an unquoted value")),
        ([b'1,"abc"def,2\n'], (0, 1, "a quote inside an unquoted value")),
        ([b"a\nb\n\\.\nc\n"], (0, 3, "a line that is \\. alone")),
        ([b"a\r\n\\.\r\nc\r\n"], (0, 2, "a line that is \\. alone")),
        ([b"a\n\\."], (0, 2, "a line that is \\. alone")),
        ([b'1,"line1\n', b'line2"x,2\n'], (1, 1, "a quote inside an unquoted value")),
    ],
)
def test_what_copy_reads_otherwise_is_found_at_its_line(
    blocks: list[bytes], expected: tuple[int, int, str]
) -> None:
    assert first_misread(blocks) == expected


def test_a_tab_delimited_block_is_judged_by_its_own_delimiter() -> None:
    assert first_misread([b'1\t"a\tb"\t2\n'], delimiter="\t") is None
    assert first_misread([b'1\t27"\t2\n'], delimiter="\t") == (
        0,
        1,
        "a quote inside an unquoted value",
    )


def test_blocks_without_quotes_are_counted_so_later_lines_are_named_right() -> None:
    """A block with nothing to check passes at C speed, and its lines still count."""
    safety = CopySafety('"', ",")
    assert safety.check(b"1,a\n2,b\n3,c\n") is None
    misread = safety.check(b'4,ok\n5,Monitor 27",x\n')
    assert misread is not None and misread.line == 5
