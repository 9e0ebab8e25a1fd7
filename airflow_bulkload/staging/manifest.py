"""The manifest model shared by staging (which writes it) and loading (which reads it).

Everything here is plain data that round-trips through JSON, so it can travel in XCom (small
dicts, never data) and live in S3 as ``manifest.json``; :func:`read_manifest` is the one way to
read it back from S3.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, overload

from airflow_bulkload.exceptions import BulkLoadError, InvalidFileFormatError
from airflow_bulkload.s3io import parse_s3_uri, s3_error_code

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1
Compression = Literal["gzip", "none"]

_FORMATS = ("csv", "text", "parquet", "jsonl")
#: input formats whose files name (and type) their own columns, read by DuckDB in staging
SELF_DESCRIBING_FORMATS = ("parquet", "jsonl")


@dataclass(frozen=True)
class FileFormat:
    r"""How the rows of a file are written.

    ``format`` is ``"csv"`` (RFC 4180 quoting) or ``"text"`` (PostgreSQL text format: tab-separated,
    backslash escapes, ``\N`` for NULL). ``null`` is the string that means SQL NULL; ``None`` takes
    the format's default (unquoted empty field for csv, ``\N`` for text). An *input* may also be
    ``"parquet"`` or ``"jsonl"`` (JSON Lines): staging reads it with DuckDB, by its own column
    names and types, and the other fields do not apply.
    """

    format: str = "csv"
    delimiter: str = ","
    header: bool = False
    null: str | None = None
    quote: str = '"'
    escape: str | None = None
    encoding: str = "UTF8"

    def __post_init__(self) -> None:
        if self.format not in _FORMATS:
            raise InvalidFileFormatError(f"format must be one of {_FORMATS}, got {self.format!r}")
        for name in ("delimiter", "quote", "escape"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str) or len(value) != 1 or value in "\r\n\0":
                raise InvalidFileFormatError(
                    f"{name} must be a single character other than CR, LF or NUL, got {value!r}"
                )
        if self.null is not None and any(c in self.null for c in "\r\n\0"):
            raise InvalidFileFormatError(f"null string may not hold CR, LF or NUL: {self.null!r}")
        if not self.encoding.replace("-", "").replace("_", "").isalnum():
            raise InvalidFileFormatError(f"encoding name is not valid: {self.encoding!r}")

    @property
    def self_describing(self) -> bool:
        """Whether the files name their own columns (Parquet, JSON Lines), not a header line."""
        return self.format in SELF_DESCRIBING_FORMATS

    @property
    def effective_null(self) -> str:
        if self.null is not None:
            return self.null
        return "" if self.format == "csv" else "\\N"

    @property
    def effective_escape(self) -> str:
        return self.escape if self.escape is not None else self.quote

    @property
    def python_encoding(self) -> str:
        """The codec name Python knows for ``encoding`` (``UTF8`` -> ``utf-8``)."""
        name = self.encoding.lower().replace("_", "-")
        return {"utf8": "utf-8", "latin1": "latin-1", "sql-ascii": "ascii"}.get(name, name)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | FileFormat | None) -> FileFormat:
        """Build from a DAG author's dict (unknown keys are an error, not silently ignored)."""
        if data is None:
            return cls()
        if isinstance(data, FileFormat):
            return data
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidFileFormatError(
                f"unknown file_format keys {sorted(unknown)}; known: {sorted(known)}"
            )
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def without_header(self) -> FileFormat:
        return replace(self, header=False)


@dataclass(frozen=True)
class ChunkSpec:
    """One staged object: what the load task needs, and what it checks the load against.

    ``rows`` is the number of data rows (header excluded); ``checksum`` identifies the content
    (sha256 of the stored bytes, or the S3 ETag for input loaded as is). ``first_key`` and
    ``last_key`` are the ``key_columns`` values of the chunk's first and last record: the ledger
    keeps them to check, before a re-run skips the chunk, that its rows are still in the table.
    """

    uri: str
    checksum: str
    rows: int | None = None
    bytes: int = 0
    raw_bytes: int | None = None
    index: int = 0
    compression: Compression = "gzip"
    file_format: dict[str, Any] = field(default_factory=dict)
    columns: list[str] | None = None
    first_key: list[Any] | None = None
    last_key: list[Any] | None = None
    #: the columns ``first_key``/``last_key`` hold (the table's primary or unique key)
    key_columns: list[str] | None = None
    #: the S3 ETag of the staged object, checked by server-side loads (they never see the bytes)
    etag: str | None = None
    # A *direct* chunk is (a byte range of) an input object, loaded with no staged copy: it
    # names its ledger key under the staging prefix and its manifest there, the object's
    # version when the bucket keeps versions, the bytes ``[start, end)`` of the stored object, and whether its first line is
    # the file's header (skipped while streaming).
    ledger_key: str | None = None
    manifest_uri: str | None = None
    version_id: str | None = None
    byte_range: list[int] | None = None
    skip_header: bool = False

    @property
    def bucket(self) -> str:
        return parse_s3_uri(self.uri)[0]

    @property
    def object_key(self) -> str:
        """The key of the S3 object the chunk's bytes are in."""
        return parse_s3_uri(self.uri)[1]

    @property
    def key(self) -> str:
        """The chunk's key in the ledger: its staged object's key, or a direct chunk's own."""
        return self.ledger_key or self.object_key

    @property
    def is_direct(self) -> bool:
        return self.ledger_key is not None

    @property
    def manifest_location(self) -> str:
        """The URI of the manifest that lists this chunk."""
        return self.manifest_uri or self.uri.rsplit("/", 1)[0] + "/manifest.json"

    @property
    def label(self) -> str:
        """The chunk as a person finds it: its object, and for a range its bytes."""
        if self.byte_range:
            return f"{self.uri} (bytes {self.byte_range[0]}-{self.byte_range[1]})"
        return self.uri

    @property
    def format(self) -> FileFormat:
        return FileFormat.from_dict(self.file_format)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | ChunkSpec) -> ChunkSpec:
        if isinstance(data, ChunkSpec):
            return data
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Manifest:
    """The list of chunks of one staged input. Its presence in S3 means staging completed."""

    input_fingerprint: str
    file_format: dict[str, Any]
    columns: list[str] | None
    chunks: list[ChunkSpec]
    sort_key: list[str] | None = None
    total_rows: int = 0
    total_bytes: int = 0
    created_at: str = ""
    version: int = MANIFEST_VERSION
    # added by staging; optional so manifests written without them still read
    sort_key_types: list[str] | None = None  # DuckDB types the sort key was ordered by
    total_raw_bytes: int = 0  # uncompressed bytes over all chunks
    source_count: int = 0  # input files staged
    source_bytes: int = 0  # their size as stored (compressed when they are gzip)
    sources: list[str] = field(default_factory=list)  # the input objects/files read, in order
    # how the input files are written (``file_format`` is the staged chunks'), so a load error
    # can be traced back to its input file and line
    source_format: dict[str, Any] = field(default_factory=dict)
    # records set aside while staging (``max_errors``) and the files that list them
    rejected_rows: int = 0
    rejects: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data, indent=2, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str | bytes) -> Manifest:
        data = json.loads(text)
        if data.get("version") != MANIFEST_VERSION:
            raise ValueError(f"unsupported manifest version {data.get('version')!r}")
        data["chunks"] = [ChunkSpec.from_dict(c) for c in data["chunks"]]
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def staging_key_of(manifest_uri: str) -> str:
    """The S3 key prefix of a staging: the folder the manifest is in, ``/``-terminated.

    The chunk ledger and the load records name a staged input by it.
    """
    return parse_s3_uri(manifest_uri.rsplit("/", 1)[0] + "/")[1]


@overload
def read_manifest(s3: Any, uri: str, *, required: Literal[True]) -> Manifest: ...


@overload
def read_manifest(s3: Any, uri: str, *, required: bool = False) -> Manifest | None: ...


def read_manifest(s3: Any, uri: str, *, required: bool = False) -> Manifest | None:
    """The manifest at ``uri``, read with the S3 client ``s3``.

    ``None`` when there is none, or it is unreadable (staging treats a broken manifest like a
    partial attempt and stages again); with ``required``, either raises
    :class:`~airflow_bulkload.exceptions.BulkLoadError` naming ``uri`` instead. A missing bucket
    always raises.
    """
    bucket, key = parse_s3_uri(uri)
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    except Exception as exc:
        code = s3_error_code(exc)
        if code == "NoSuchBucket":
            raise BulkLoadError(
                f"the staging bucket {bucket!r} does not exist (staging URI {uri}): create it, "
                "or point staging= at a bucket the workers may write to"
            ) from exc
        if code not in ("NoSuchKey", "404"):
            raise
        if required:
            raise BulkLoadError(
                f"{uri}: no manifest there; its staging did not complete or was deleted"
            ) from exc
        return None
    try:
        return Manifest.from_json(body.read())
    except (ValueError, TypeError, KeyError) as exc:
        if required:
            raise BulkLoadError(f"{uri} is not a readable manifest: {exc}") from exc
        log.warning("%s is not a readable manifest (%s); treating it as absent", uri, exc)
        return None
    finally:
        body.close()


def write_manifest(
    s3: Any, manifest_uri: str, manifest: Manifest, upload_args: Mapping[str, str]
) -> None:
    """Written last: its presence is what says staging (or planning) completed."""
    bucket, key = parse_s3_uri(manifest_uri)
    s3.put_object(
        Bucket=bucket,
        Key=key,
        Body=manifest.to_json().encode("utf-8"),
        **{**upload_args, "ContentType": "application/json"},
    )


def _runs_back(earlier: Sequence[Any] | None, later: Sequence[Any] | None) -> bool:
    """Whether key ``later`` sorts below ``earlier``, compared part by part.

    Parts that both read as whole numbers compare as numbers, others as text; absent keys and a
    number against text say no.
    """
    if not earlier or not later:
        return False
    for before, after in zip(earlier, later, strict=False):
        a, b = _as_number(before), _as_number(after)
        if type(a) is not type(b):
            return False  # a number against text: nothing to tell
        if a != b:
            return b < a  # type: ignore[operator]  # both int or both str
    return False


def _as_number(part: Any) -> int | str:
    try:
        return int(str(part))
    except ValueError:
        return str(part)


def first_out_of_order(chunks: Sequence[ChunkSpec]) -> int | None:
    """The index of the first chunk whose key runs back, or ``None`` when the keys are in order.

    A key runs back when a chunk's last key is below its first, or its first below the previous
    chunk's last. A check of a declared order, by the keys staging recorded (text keys compare as
    text, which may differ from the table's collation): it can tell an input is not sorted,
    never that it is.
    """
    previous: Sequence[Any] | None = None
    for chunk in chunks:
        if _runs_back(previous, chunk.first_key) or _runs_back(chunk.first_key, chunk.last_key):
            return chunk.index
        previous = chunk.last_key or previous
    return None
