"""Pure staging decisions: sizes, names, prefixes, fingerprints, limits. No I/O here.

Everything in this module is deterministic, so a re-run of the same task with the same input
computes the same prefix and the same chunk names, and finds its own earlier work.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from airflow_bulkload.staging.manifest import FileFormat

#: The format every staged chunk is written in, whatever the input looked like.
#:
#: CSV without header, ``,`` delimiter, ``"`` quote doubled to escape, UTF-8, LF line ends, and SQL
#: NULL written as the *unquoted* word ``NULL``. A value that is the text ``NULL`` is written quoted
#: (``"NULL"``) and an empty string as an empty field. Why the word ``NULL``: it is the one NULL
#: marker both target engines tell apart from text natively — PostgreSQL ``COPY ... (FORMAT csv,
#: NULL 'NULL')`` matches the null string only when unquoted, and MySQL/MariaDB ``LOAD DATA ...
#: FIELDS OPTIONALLY ENCLOSED BY '"' ESCAPED BY ''`` reads an unquoted ``NULL`` as NULL and a quoted
#: one as text. The CSV default (empty unquoted field = NULL) cannot be told apart from an empty
#: string by MySQL, and ``\\N`` needs a backslash escape character that PostgreSQL CSV does not have.
STAGED_FORMAT = FileFormat(
    format="csv", delimiter=",", header=False, null="NULL", quote='"', escape='"', encoding="UTF8"
)

#: Guess of how much a gzip CSV input grows when decompressed, for the temp-space estimate only.
GZIP_EXPANSION_ESTIMATE = 5

DEFAULT_CHUNK_SIZE = "256MB"
DEFAULT_MAX_MAP_LENGTH = 1024
MANIFEST_NAME = "manifest.json"

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def parse_size(value: str | int) -> int:
    """``"256MB"`` -> 256000000, ``"1GiB"`` -> 1073741824, ``4096`` -> 4096 (bytes, at least 1).

    Decimal units (kB, MB, GB) are powers of 1000, binary ones (KiB, MiB, GiB) powers of 1024.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE_RE.match(str(value))
        unit = (match.group(2) or "").lower() if match else None
        if match is None or unit not in _SIZE_UNITS:
            raise ValueError(
                f"not a size: {value!r} (expected a number of bytes or e.g. '256MB', '1GiB')"
            )
        size = int(float(match.group(1)) * _SIZE_UNITS[unit])
    if size < 1:
        raise ValueError(f"size must be at least 1 byte, got {value!r}")
    return size


def parse_size_argument(value: Any, name: str) -> int:
    """:func:`parse_size` of the argument ``name``, refused with a message naming it."""
    try:
        return parse_size(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a size such as '256MB' or a number of bytes, got {value!r}"
        ) from exc


def format_size(nbytes: float) -> str:
    """Human-readable size for logs and messages (decimal units)."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(nbytes) < 1000:
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1000
    return f"{nbytes:.1f} TB"


_SAFE_SEGMENT = re.compile(r"[^A-Za-z0-9._=-]+")


def safe_segment(value: str) -> str:
    """An S3 key segment for ``value``.

    Unsafe characters replaced, plus a short hash when anything had to change, so two different
    values never map to the same segment (``a/b`` vs ``a_b``).
    """
    cleaned = _SAFE_SEGMENT.sub("_", value).strip("._")[:100] or "_"
    if cleaned == value:
        return cleaned
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:8]
    return f"{cleaned}-{digest}"


def run_segment(
    *, data_interval_start: Any = None, data_interval_end: Any = None, run_id: str | None = None
) -> str:
    """The part of the prefix that tells runs apart.

    The data interval when the run has one (so a re-run of the same date finds its work whatever its
    run id), else the run id.
    """
    if data_interval_start is not None and data_interval_end is not None:
        return safe_segment(f"{_iso(data_interval_start)}__{_iso(data_interval_end)}")
    if run_id:
        return safe_segment(run_id)
    raise ValueError("a staging prefix needs a data interval or a run id")


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def staging_prefix(staging_uri: str, *, dag_id: str, table: str, run: str, fingerprint: str) -> str:
    """``s3://bucket/base/<dag>/<table>/<run>/<fingerprint[:16]>/`` — deterministic per input.

    The fingerprint is part of the prefix so that a changed input never reuses an old chunk's key:
    the loaders' ledger identifies chunks by key, and a new key means a new chunk.
    """
    base = staging_uri.rstrip("/")
    if not base.startswith("s3://"):
        raise ValueError(f"staging must be an S3 URI (s3://bucket/prefix), got {staging_uri!r}")
    segments = [safe_segment(dag_id), safe_segment(table), run, fingerprint[:16]]
    return f"{base}/{'/'.join(segments)}/"


def chunk_name(index: int, compression: str) -> str:
    """``chunk-00042.csv.gz`` (sorts in chunk order up to 100 000 chunks)."""
    return f"chunk-{index:05d}.csv" + (".gz" if compression == "gzip" else "")


@dataclass(frozen=True)
class SourceFile:
    """One input file as listed, before anything is read: what the fingerprint is made of.

    ``version`` is the S3 ETag for S3 objects and the modification time (ns) for local files.
    """

    location: str  # s3://bucket/key or an absolute local path
    size: int
    version: str

    @property
    def is_s3(self) -> bool:
        return self.location.startswith("s3://")

    @property
    def looks_compressed(self) -> bool:
        return self.location.lower().endswith((".gz", ".gzip", ".zst", ".zstd", ".bz2", ".parquet"))


def input_fingerprint(sources: Sequence[SourceFile], options: Mapping[str, Any]) -> str:
    """sha256 over the sources (location, size, version) and every option that shapes the chunks.

    Options belong in it because the same input staged with another chunk size, sort key or
    compression gives different chunks, which must not be mistaken for the earlier ones.
    """
    payload = {
        "sources": [asdict(s) for s in sorted(sources, key=lambda s: s.location)],
        "options": dict(options),
        "staged_format": STAGED_FORMAT.to_dict(),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def estimate_raw_bytes(sources: Iterable[SourceFile]) -> int:
    """Uncompressed size of the input, guessed from sizes and names (compressed inputs expand)."""
    return sum(s.size * (GZIP_EXPANSION_ESTIMATE if s.looks_compressed else 1) for s in sources)


def temp_space_needed(sources: Sequence[SourceFile], *, sort: bool, chunk_size: int) -> int:
    """Bytes of temp disk a staging run needs at its peak.

    Downloaded S3 inputs (their stored size) + the normalized input (≈ uncompressed size) + when
    sorting DuckDB's spill files (≈ the uncompressed size again, at most) + two chunks in flight.
    """
    raw = estimate_raw_bytes(sources)
    downloads = sum(s.size for s in sources if s.is_s3)
    return downloads + raw * (2 if sort else 1) + 2 * min(chunk_size, raw)


def chunk_count(total_bytes: int, chunk_size: int) -> int:
    """Chunks the splitter writes for ``total_bytes`` of normalized rows: an upper bound.

    The splitter closes a chunk once it holds at least ``chunk_size`` bytes.
    """
    return math.ceil(total_bytes / chunk_size) if total_bytes > 0 else 0


def even_chunk_size(total_bytes: int, chunk_size: int) -> int:
    """The size that cuts ``total_bytes`` into as many chunks as ``chunk_size`` does, all alike.

    Never larger than ``chunk_size``. 344 MB in chunks of 256 MB made one of 256 MB and one of
    88 MB: two load sessions, one idle for most of the load (MySQL, 10 M rows: 18.4 s and 4.3 s
    side by side). Two of 172 MB keep both busy.
    """
    count = chunk_count(total_bytes, chunk_size)
    return math.ceil(total_bytes / count) if count > 1 else chunk_size


def fit_chunk_size(
    total_bytes: int, chunk_size: int, max_map_length: int, *, grow: bool, what: str
) -> int:
    """The chunk size to use so the chunk count stays within Airflow's ``max_map_length``.

    Returns ``chunk_size`` when it fits; when it does not, raises (default) or, with ``grow``,
    returns the smallest size that fits.
    """
    if chunk_count(total_bytes, chunk_size) <= max_map_length:
        return chunk_size
    needed = math.ceil(total_bytes / max_map_length)
    if grow:
        return needed
    raise ValueError(
        f"{what}: {format_size(total_bytes)} in chunks of {format_size(chunk_size)} makes "
        f"{chunk_count(total_bytes, chunk_size)} chunks, more than Airflow maps in one task "
        f"(core.max_map_length = {max_map_length}); use chunk_size of at least "
        f"{format_size(needed)}, set grow_chunk_size=True, or raise core.max_map_length"
    )


#: how :func:`plan_groups` cuts, part of a grouped input's fingerprint (:func:`grouping_options`)
GROUP_CUT = "even-in-order"


def grouping_options(group_bytes: int | None) -> dict[str, Any]:
    """What a grouped input's fingerprint adds to the options: the group size and how it cuts.

    The groups name the chunks (``group-NNNNN-chunk-MMMMM``), so another cut of the same input
    (another size, or the cut of an earlier release) stages under another prefix and never
    reuses the chunk keys a load of the earlier cut recorded in the ledger.
    """
    return {"group_bytes": group_bytes, "group_cut": GROUP_CUT}


def plan_groups(sources: Sequence[SourceFile], group_bytes: int) -> list[list[SourceFile]]:
    """Cut the input, in listing order, into groups of at most ``group_bytes`` (estimated raw).

    Each group is staged by a task of its own, so a task's temp disk follows its group, not the
    whole input. An object larger than ``group_bytes`` is a group by itself. The groups are as
    few as cuts at ``group_bytes`` make, and the largest of them as small as listing order allows:
    eight parts of 538 MB in groups of 4 GB made seven parts and one (one task staged 79 s, the
    other 19 s); now four and four.
    """
    if group_bytes < 1:
        raise ValueError(f"group size must be positive, got {group_bytes}")
    sizes = [estimate_raw_bytes([source]) for source in sources]
    count = len(_cut_in_order(sizes, group_bytes))
    # the smallest bound that still cuts as few groups: the largest group as small as it can be
    high = group_bytes
    low = min(high, max(1, math.ceil(sum(sizes) / max(count, 1))))
    while low < high:
        middle = (low + high) // 2
        if len(_cut_in_order(sizes, middle)) <= count:
            high = middle
        else:
            low = middle + 1
    return [[sources[i] for i in group] for group in _cut_in_order(sizes, low)]


def _cut_in_order(sizes: Sequence[int], bound: int) -> list[list[int]]:
    """Indexes of ``sizes`` in groups of at most ``bound``, in order (a larger one alone)."""
    groups: list[list[int]] = []
    current: list[int] = []
    size = 0
    for index, raw in enumerate(sizes):
        if current and size + raw > bound:
            groups.append(current)
            current, size = [], 0
        current.append(index)
        size += raw
    if current:
        groups.append(current)
    return groups


@dataclass(frozen=True)
class StagingGroup:
    """What one mapped staging task stages: some of the input's files, under a prefix of its own.

    ``prefix`` is ``<input prefix>group-NNNNN-``: its chunks (``group-NNNNN-chunk-MMMMM.csv.gz``)
    and its own ``group-NNNNN-manifest.json`` are named with it, beside the input's
    ``manifest.json``, written once every group is staged (``manifest_uri``).
    ``options`` are the staging options as a dict (the sort key and chunk size already resolved).
    """

    index: int
    sources: list[SourceFile]
    prefix: str
    manifest_uri: str
    fingerprint: str
    options: dict[str, Any]

    @property
    def group_fingerprint(self) -> str:
        """The input's fingerprint, the group's number and its files, as its manifest records.

        A group staged under another cut of the same input (a plan of an earlier release) is
        so staged again, never taken for this one.
        """
        members = [asdict(source) for source in self.sources]
        digest = hashlib.sha256(json.dumps(members, sort_keys=True).encode("utf-8")).hexdigest()
        return f"{self.fingerprint}/group-{self.index:05d}/{digest[:16]}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | StagingGroup) -> StagingGroup:
        if isinstance(data, StagingGroup):
            return data
        return cls(
            index=int(data["index"]),
            sources=[SourceFile(**source) for source in data["sources"]],
            prefix=str(data["prefix"]),
            manifest_uri=str(data["manifest_uri"]),
            fingerprint=str(data["fingerprint"]),
            options=dict(data["options"]),
        )


def group_prefix(prefix: str, index: int) -> str:
    """A group's key prefix: its chunks and manifest sit beside the input's, in the same folder.

    Not a folder of its own: everything that finds an input by its chunks' folder (the ledger's
    load records, superseded inputs, the same input under another interval) finds grouped
    chunks the same way.
    """
    return f"{prefix}group-{index:05d}-"


_INT_TYPES = {
    "smallint": "SMALLINT",
    "int2": "SMALLINT",
    "integer": "INTEGER",
    "int": "INTEGER",
    "int4": "INTEGER",
    "mediumint": "INTEGER",
    "serial": "INTEGER",
    "bigint": "BIGINT",
    "int8": "BIGINT",
    "bigserial": "BIGINT",
    "tinyint": "SMALLINT",
    "year": "INTEGER",
}
_SIMPLE_TYPES = {
    "real": "REAL",
    "float4": "REAL",
    "float": "DOUBLE",
    "float8": "DOUBLE",
    "double": "DOUBLE",
    "double precision": "DOUBLE",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp without time zone": "TIMESTAMP",
    "datetime": "TIMESTAMP",
    "timestamptz": "TIMESTAMPTZ",
    "timestamp with time zone": "TIMESTAMPTZ",
    "time": "TIME",
    "time without time zone": "TIME",
    "uuid": "UUID",
}
_DECIMAL_RE = re.compile(r"^(?:numeric|decimal)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")


def duckdb_sort_type(sql_type: str | None) -> str:
    """The DuckDB type to cast a key column to for sorting, from a PostgreSQL/MySQL type name.

    Numbers, dates, times and UUIDs sort by value; anything else (text, enums, unknown types)
    sorts as text, which only costs locality, never correctness, because sorting is an
    optimisation of the load order.
    """
    if not sql_type:
        return "VARCHAR"
    name = re.sub(r"\s+", " ", sql_type.strip().lower())
    unsigned = name.endswith(" unsigned")
    name = name.removesuffix(" unsigned").removesuffix(" zerofill")
    # int(11), datetime(3), timestamp(6) with time zone: the width does not change the order
    base = re.sub(r"\s*\(\s*\d+\s*\)", "", name).strip()
    if base in _INT_TYPES:
        duck = _INT_TYPES[base]
        if unsigned:  # one size up so the largest unsigned value still fits
            return {"SMALLINT": "INTEGER", "INTEGER": "BIGINT", "BIGINT": "UBIGINT"}[duck]
        return duck
    if base in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[base]
    match = _DECIMAL_RE.match(name)
    if match:
        precision = int(match.group(1) or 38)
        scale = int(match.group(2) or 0)
        if precision > 38 or scale > precision:
            return "DOUBLE"
        if match.group(1) is None:  # PostgreSQL numeric without precision: any scale
            return "DOUBLE"
        return f"DECIMAL({precision},{scale})"
    return "VARCHAR"


def resolve_sort_types(
    sort_key: Sequence[str], types: Mapping[str, str] | Sequence[str] | None
) -> list[str]:
    """DuckDB types for ``sort_key``, from a ``{column: sql_type}`` map or a list in key order."""
    if types is None:
        return ["VARCHAR"] * len(sort_key)
    if isinstance(types, Mapping):
        return [duckdb_sort_type(types.get(column)) for column in sort_key]
    if len(types) != len(sort_key):
        raise ValueError(
            f"sort_key_types has {len(types)} entries but sort_key has {len(sort_key)} columns"
        )
    return [duckdb_sort_type(t) for t in types]


#: the encodings PostgreSQL's COPY reads as such (others are staged, i.e. re-encoded)
DIRECT_ENCODINGS = ("utf-8", "latin-1")


def direct_refusal(
    sources: Sequence[SourceFile],
    fmt: FileFormat,
    *,
    sort_key: Sequence[str],
    max_errors: int = 0,
) -> str | None:
    """Why this input cannot be loaded as stored (it is staged then), or ``None`` when it can.

    The engine's side (a loader that reads CSV as written, the ``client`` method) is the
    caller's to decide: see ``StagingOptions.direct``.
    """
    if sort_key:
        return "the input is sorted first"
    if max_errors:
        return "records that do not parse are set aside while staging (max_errors)"
    if fmt.format != "csv":
        return f"format {fmt.format!r} is staged"
    if fmt.effective_escape != fmt.quote:
        return (
            "an escape character other than the quote is staged (cut points are checked by quotes)"
        )
    if not (fmt.delimiter.isascii() and fmt.quote.isascii()):
        # MySQL's LOAD DATA takes no non-ASCII separator; the quote check reads bytes
        return "a non-ASCII delimiter or quote is staged"
    if fmt.python_encoding not in DIRECT_ENCODINGS:
        return f"encoding {fmt.encoding!r} is re-encoded by staging"
    if not sources:
        return "no input objects"
    local = [s.location for s in sources if not s.is_s3]
    if local:
        return f"local files ({local[0]}, ...) are staged into S3"
    return None
