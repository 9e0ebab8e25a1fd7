"""Where a load error points: the input object and line of the record a chunk failed on.

:class:`LoadErrorTracingMixin` is the part of
:class:`~airflow_bulkload.hooks.bulk_load.BulkLoadHook` that turns a chunk's load error (a staged
chunk's line, a MySQL row, a duplicate key, a direct reader's refusal in a byte range) into the
input file and line a user can open.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.hooks.table_truth import TableTruthMixin
from airflow_bulkload.staging.direct import DirectInputError, at_object_line, open_chunk_stream
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat, read_manifest
from airflow_bulkload.staging.origin import (
    SourceLine,
    find_record,
    read_record,
    record_with_key,
    untraced_error,
)
from airflow_bulkload.staging.sources import open_source

#: MySQL's duplicate-key message (no line: the key value, its parts joined by "-")
_DUPLICATE_ENTRY = re.compile(r"Duplicate entry '(?P<value>.*)' for key")


class LoadErrorTracingMixin(TableTruthMixin):
    """Trace a chunk's load error to its input (see the module docstring)."""

    if TYPE_CHECKING:

        def primary_key(self, table: str) -> list[str]: ...

    def _at_source(self, table: str, spec: ChunkSpec, error: ChunkLoadError) -> ChunkLoadError:
        """The error as the user can act on it: the input file and line of the bad record.

        The record is the one at the error's line, or, for a duplicate key the server names
        without a line (MySQL), the chunk's record with that key. The chunk's own place is kept
        beside it. Any failure to trace the record (the input moved, an old manifest, the search
        budget spent) leaves the error as it was.
        """
        if isinstance(error, DirectInputError):  # the reader's own finding, in its range
            try:
                return at_object_line(error, spec, self.s3)
            except Exception as exc:  # tracing is a courtesy: never hide the load's own error
                self.log.warning("could not count the lines before %s's range: %s", spec.uri, exc)
                return error
        duplicate = _DUPLICATE_ENTRY.search(error.reason) if error.line is None else None
        if error.source != spec.uri or not spec.uri.startswith("s3://"):
            return error
        if error.line is None and duplicate is None:
            return error
        key = duplicate.group("value") if duplicate else None
        try:
            key_columns = spec.key_columns or (self.primary_key(table) if key else [])
            found = self._find_source_line(spec, error.line, key, key_columns)
        except Exception as exc:  # tracing is a courtesy: never hide the load's own error
            self.log.warning("could not trace an error of %s to its input: %s", spec.uri, exc)
            return untraced_error(spec, error)
        if found is None:
            return untraced_error(spec, error)
        staged = f"line {error.line}" if error.line is not None else f"key {key}"
        return ChunkLoadError(
            found.source,
            # a direct chunk is the input object: its loader's line count omits the header
            error.reason if spec.is_direct else f"{error.reason} [staged as {spec.uri}, {staged}]",
            line=found.line,
            column=error.column,
            expected=error.expected,
        )

    def _find_source_line(
        self, spec: ChunkSpec, line: int | None, key: str | None, key_columns: list[str]
    ) -> SourceLine | None:
        s3 = self.s3
        manifest = read_manifest(s3, spec.manifest_location)
        if manifest is None or not manifest.sources or not manifest.source_format:
            return None
        if FileFormat.from_dict(manifest.source_format).self_describing:
            return None  # Parquet / JSON Lines: the error names the staged chunk's line
        # a direct chunk's fields are in its own object's order
        columns = (spec.columns if spec.is_direct else None) or manifest.columns or []
        with open_chunk_stream(spec, aws_conn_id=None, client=s3) as stream:
            if line is not None:
                record = read_record(
                    stream,  # type: ignore[arg-type]
                    spec.format,
                    line,
                    counts_lines=self.dialect.load_errors_count_lines,
                )
            else:
                record = record_with_key(
                    stream,  # type: ignore[arg-type]
                    spec.format,
                    [columns.index(c) for c in key_columns]
                    if set(key_columns) <= set(columns)
                    else [],
                    key or "",
                )
        if record is None:
            return None
        return find_record(
            record,
            columns,
            manifest.sources,
            staged_format=spec.format,
            source_format=FileFormat.from_dict(manifest.source_format),
            open_source=lambda source: open_source(source, s3),
        )
