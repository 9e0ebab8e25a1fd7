"""What shapes a staging run: the options that make its chunks and the resources it may use."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from airflow_bulkload.s3io import check_upload_args
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.planning import DEFAULT_MAX_MAP_LENGTH

COMPRESSIONS = ("gzip", "none")
#: ``sort_by_primary_key`` for input already in primary-key order: declared, not sorted
PRESORTED = "presorted"


@dataclass(frozen=True)
class StagingOptions:
    """Everything that shapes the staged chunks (and so belongs in the fingerprint)."""

    file_format: FileFormat = field(default_factory=FileFormat)
    columns: list[str] | None = None
    sort_key: list[str] = field(default_factory=list)
    sort_types: list[str] = field(default_factory=list)
    #: the key the input declares itself in order of (within each file, and the files in the
    #: order listed): nothing sorts it, and the manifest records it as the input's sort key
    presorted_key: list[str] = field(default_factory=list)
    chunk_size: int = 256_000_000
    compression: str = "gzip"
    compress_level: int = 1
    #: the table's key (primary, else a NOT NULL unique one): each chunk records its first and
    #: last record's key, for the ledger's checks; not part of the fingerprint (no rewrite)
    probe_key: list[str] = field(default_factory=list)
    #: the table's loadable columns, naming the input's columns when it has neither a header
    #: nor ``columns``
    table_columns: list[str] | None = None
    #: their declared types, which Parquet / JSON Lines input is checked against (not part of
    #: the fingerprint: the same input stages the same)
    table_types: dict[str, str] = field(default_factory=dict)
    #: load S3 objects as they are stored when the input needs no rewrite (see
    #: :mod:`~airflow_bulkload.staging.direct`); the caller sets it only for an engine whose
    #: loader reads CSV as written, with the ``client`` method
    direct: bool = False
    #: quoted values may hold line ends (the safe default): direct objects are loaded whole;
    #: ``False`` declares they never do, and large plain objects are cut in byte ranges
    quoted_newlines: bool = True
    #: extra S3 arguments of every object staging writes (chunks, manifests), as S3Hook's
    #: ``extra_args``: e.g. SSE-KMS; not part of the fingerprint (the chunks' bytes are the same)
    upload_args: dict[str, str] = field(default_factory=dict)
    #: how many CSV records that do not read as the input's format staging may set aside (see
    #: :mod:`~airflow_bulkload.staging.rejects`); 0 (default): any such record fails staging
    max_errors: int = 0
    #: an S3 folder for the rejects files; default: beside the chunks
    reject_uri: str | None = None

    def __post_init__(self) -> None:
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {COMPRESSIONS}, got {self.compression!r}")
        if len(self.sort_types) != len(self.sort_key):
            raise ValueError("sort_types needs one type per sort_key column")
        if self.sort_key and self.presorted_key:
            raise ValueError(
                "an input is either sorted by staging (sort_key) or presorted, not both"
            )
        if not 0 <= self.compress_level <= 9:
            raise ValueError(f"compress_level must be 0-9, got {self.compress_level}")
        check_upload_args(self.upload_args)
        if isinstance(self.max_errors, bool) or not isinstance(self.max_errors, int):
            raise ValueError(f"max_errors must be a whole number, got {self.max_errors!r}")
        if self.max_errors < 0:
            raise ValueError(f"max_errors must be 0 or more, got {self.max_errors}")
        if self.reject_uri is not None and not (
            self.reject_uri.startswith("s3://") and self.reject_uri.endswith("/")
        ):
            raise ValueError(
                f"reject_uri must be an S3 folder (s3://bucket/path/), got {self.reject_uri!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "file_format": self.file_format.to_dict()}

    @property
    def ordered_by(self) -> list[str] | None:
        """The key the staged chunks are in order of: the sort's, or the one declared."""
        return list(self.sort_key or self.presorted_key) or None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StagingOptions:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["file_format"] = FileFormat.from_dict(values.get("file_format") or {})
        return cls(**values)

    def fingerprint_options(self) -> dict[str, Any]:
        return {
            "file_format": self.file_format.to_dict(),
            "columns": self.columns,
            "sort_key": self.sort_key,
            "sort_types": self.sort_types,
            "chunk_size": self.chunk_size,
            "compression": self.compression,
            "compress_level": self.compress_level,
            **({"direct": True, "quoted_newlines": self.quoted_newlines} if self.direct else {}),
            # the manifest says what order the input is in
            **({"presorted_key": self.presorted_key} if self.presorted_key else {}),
            # other records are staged with a threshold than without one
            **({"max_errors": self.max_errors} if self.max_errors else {}),
        }


@dataclass(frozen=True)
class Resources:
    """Local resources a staging run may use."""

    temp_dir: str | None = None
    memory_limit: str = "1GB"
    threads: int | None = None
    check_temp_space: bool = True
    max_map_length: int = DEFAULT_MAX_MAP_LENGTH
    grow_chunk_size: bool = False
