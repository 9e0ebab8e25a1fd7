"""The direct chunk reader on awkward block boundaries: the bytes handed to COPY, the quote
checks and the line numbers must not depend on where the S3 stream happens to split."""

from __future__ import annotations

import io

import pytest

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.staging import direct
from airflow_bulkload.staging.direct import TAIL_BYTES, _DirectReader
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat


class Trickle(io.RawIOBase):
    """A stream that hands out at most ``step`` bytes a read, as a network stream may."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = io.BytesIO(data)
        self._step = step

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        return self._data.read(min(self._step, size if size and size > 0 else self._step))


def spec(header: bool = False) -> ChunkSpec:
    return ChunkSpec(
        uri="s3://in/a.csv",
        checksum="etag:x:0-0",
        file_format=FileFormat(header=False).to_dict(),
        columns=["id", "note"],
        ledger_key="staging/x/direct-00000",
        skip_header=header,
    )


def read_all(data: bytes, step: int, *, header: bool = False) -> bytes:
    reader = _DirectReader(Trickle(data, step), spec(header))  # type: ignore[arg-type]
    out = b""
    while block := reader.read(step):
        out += block
    return out


@pytest.mark.parametrize("step", [1, 2, 3, 5, 8, 64])
def test_a_stray_quote_is_refused_wherever_the_blocks_split(step: int) -> None:
    data = b"1,ab\n2,5" + b'" a,6"\n'
    with pytest.raises(ChunkLoadError, match="quote inside an unquoted value") as failure:
        read_all(data, step)
    assert failure.value.line == 2


@pytest.mark.parametrize("step", [1, 2, 3, 5, 8, 64])
def test_clean_quoted_values_pass_wherever_the_blocks_split(step: int) -> None:
    data = b'1,"x"\n2,yyy\n3,"q ""w"" e"\n4,""\n'
    assert read_all(data, step) == data


@pytest.mark.parametrize("step", [1, 2, 3, 5, 6, 64])
def test_empty_lines_are_dropped_wherever_the_blocks_split(step: int) -> None:
    data = b'1,a\r\n\r\n2,"b\n\nc"\n\n3,c\r\n'
    assert read_all(data, step) == b'1,a\r\n2,"b\n\nc"\n3,c\r\n'


@pytest.mark.parametrize("step", [1, 2, 3, 64])
def test_an_empty_crlf_line_is_dropped_in_a_block_without_an_empty_lf_line(step: int) -> None:
    """The blank-line check looks for CRLF blank lines only in blocks holding a CR at all."""
    data = b"1,a\r\n\r\n2,b\r\n"
    assert read_all(data, step) == b"1,a\r\n2,b\r\n"


@pytest.mark.parametrize("step", [1, 4, 64])
def test_the_header_is_exactly_the_first_line(step: int) -> None:
    """Planning reads the header from the first physical line: a quote in it (an inch mark in
    a name) must not make the reader skip records too."""
    data = b'a,b"in\n1,x\n2,y\n'
    assert read_all(data, step, header=True) == b"1,x\n2,y\n"


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n"])
@pytest.mark.parametrize("step", [TAIL_BYTES - 1, TAIL_BYTES, TAIL_BYTES + 7, 3 * TAIL_BYTES])
def test_first_and_last_record_across_blocks_as_large_as_the_kept_tail(
    step: int, line_end: bytes
) -> None:
    """A block at least as long as the kept tail replaces the tail instead of joining it."""
    records = [b"%d,note %d" % (i, i) for i in range(120_000)]  # about 2 MB
    data = line_end.join(records) + line_end
    reader = _DirectReader(Trickle(data, step), spec())  # type: ignore[arg-type]
    out = b""
    while block := reader.read(step):
        out += block
    assert out == data
    assert reader.first_record is not None
    assert reader.first_record.rstrip(b"\r") == records[0]
    assert reader.last_record == records[-1]
    assert reader.key_probe(["id", "note"], ["id"]) == (["0"], ["119999"])


class Objects:
    """An S3 client holding one object, answering ranged GETs."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.gets: list[str] = []

    def get_object(self, **request: str) -> dict[str, io.BytesIO]:
        self.gets.append(request["Range"])
        first, last = request["Range"].removeprefix("bytes=").split("-")
        return {"Body": io.BytesIO(self.data[int(first) : int(last) + 1])}


def test_a_refusal_in_a_later_range_names_the_objects_line_or_says_it_is_the_ranges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lines before the range are counted from the object, within a budget; past it the
    error says which line of which range, and nothing is read."""
    ranged = ChunkSpec.from_dict(spec().to_dict() | {"byte_range": [12, 20], "etag": "e"})
    objects = Objects(b"a,1\nb,2\nc,3\nd,4\ne,5\n")
    refusal = direct.DirectInputError("s3://in/a.csv", "a stray quote", line=2)

    counted = direct.at_object_line(refusal, ranged, objects)
    assert (counted.line, objects.gets) == (5, ["bytes=0-11"])

    monkeypatch.setattr(direct, "COUNT_LINES_BUDGET_BYTES", 10)
    uncounted = direct.at_object_line(refusal, ranged, objects)
    assert uncounted.line is None and objects.gets == ["bytes=0-11"]
    assert "line 2 of the range that starts at byte 12" in str(uncounted)
