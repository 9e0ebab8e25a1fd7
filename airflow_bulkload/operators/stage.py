"""StageToS3Operator: input files -> load-ready chunks in S3 plus a manifest, idempotently."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context

from airflow_bulkload.catalog import loadable_column_types, probe_key_of
from airflow_bulkload.knobs import parse_flag, parse_optional_int
from airflow_bulkload.operators.base import StagingWorkerOperator
from airflow_bulkload.operators.validation import validate_or_fail
from airflow_bulkload.s3io import check_upload_args, s3_client
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.options import PRESORTED
from airflow_bulkload.staging.planning import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_MAP_LENGTH,
    parse_size,
    resolve_sort_types,
    run_segment,
)
from airflow_bulkload.staging.stager import StageResult, StagingOptions
from airflow_bulkload.staging.stager import stage as stage_input

MANIFEST_URI_XCOM_KEY = "manifest_uri"


def airflow_max_map_length() -> int:
    """Airflow's ``[core] max_map_length``: how many instances one mapped task may expand to.

    Staging plans and pre-flight deals no more chunks or batches than that, or the mapped load
    task would fail to expand.
    """
    try:
        from airflow.sdk.configuration import conf

        return int(conf.getint("core", "max_map_length", fallback=DEFAULT_MAX_MAP_LENGTH))
    except Exception:  # a worker without readable config still gets Airflow's default
        return DEFAULT_MAX_MAP_LENGTH


def work_owner(context: Context) -> str:
    """The task instance a staging working directory belongs to."""
    return "/".join(
        str(part)
        for part in (
            context["dag"].dag_id,
            context["ti"].task_id,
            context.get("run_id"),
            getattr(context["ti"], "map_index", -1),
        )
    )


class StageToS3Operator(StagingWorkerOperator):
    r"""Turn input files into load-ready S3 chunks and a ``manifest.json``.

    Reads CSV/TSV input (plain or gzip, with or without header) from local paths/globs on the
    worker or from S3 (an object, a prefix, or a key glob), rewrites it in one normalized format
    (CSV, no header, ``,``/``"``, UTF-8, NULL as the unquoted word ``NULL``; see
    :data:`~airflow_bulkload.staging.planning.STAGED_FORMAT`), optionally sorted across the whole
    input by a key (the table's primary key), splits it on record boundaries into chunks of about
    ``chunk_size`` uncompressed bytes, gzips them (unless the load method is ``aurora_s3``) and
    uploads them under::

        <staging>/<dag_id>/<table>/<data interval or run id>/<input fingerprint>/chunk-NNNNN.csv.gz

    ``manifest.json`` is written last: its presence means staging completed. A re-run with the same
    input finds it and does nothing; an interrupted attempt's chunks are deleted first; a changed
    input (other sizes/ETags/mtimes, or other options) gets a new fingerprint and so a new prefix.

    Returns the list of chunk dicts, one per chunk, ready for
    ``LoadChunkOperator.partial(...).expand(chunk=stage.output)``, and pushes the manifest's URI
    under the XCom key ``manifest_uri``.

    **Worker resources.** Memory: DuckDB's ``duckdb_memory_limit`` plus a few MB. Temp disk in
    ``temp_dir``: the downloaded S3 inputs (their stored size) + the normalized input (about its
    uncompressed size) + when sorting DuckDB's spill (up to the uncompressed size again) + two
    chunks. So about 1x the uncompressed input unsorted and 2x sorted; the operator checks the free
    space before starting and fails with the numbers when it is short. The files live in a
    directory of the attempt under ``<temp_dir>/bulkload-staging/``, removed when it ends; one a
    killed attempt (kill -9, a lost worker) left behind is removed by the next staging task on
    that worker.

    :param source: local path/glob, ``s3://bucket/key``, ``s3://bucket/prefix/`` or
        ``s3://bucket/prefix/*.csv.gz``, or a list of them.
    :param staging: S3 URI under which the chunks go (``s3://bucket/staging``).
    :param table: the target table; names the prefix and, with ``sort_by_primary_key``, is where
        the key comes from.
    :param file_format: the *input's* format (dict of
        :class:`~airflow_bulkload.staging.FileFormat` fields: delimiter, quote, escape, null,
        header, encoding); ``format`` must be ``csv`` (TSV is csv with ``delimiter="\t"``).
    :param columns: the input's column names, in file order (needed without a header to sort by
        name; with a header they replace its names). The chunks carry them for the load.
    :param sort_key: columns to sort the whole input by, e.g. ``["id"]``.
    :param sort_key_types: their SQL types (``{"id": "bigint"}`` or a list in key order) so the
        sort is by value (numbers, dates); without types the key sorts as text.
    :param sort_by_primary_key: read the sort key and its types from ``table`` through
        ``conn_id`` (PostgreSQL or MySQL connection). ``"auto"``: only where it pays, on MySQL
        (InnoDB stores rows in key order; input in key order loaded ≈20 % faster, measured).
        ``"presorted"``: the input is already in primary-key order (each file, and the files in
        the order listed, as Spark, Athena CTAS or a database export write it): nothing sorts
        it, and the manifest says it is in key order, so MySQL loads it as sorted and staging
        needs no sort's memory or disk. A wrong declaration loads the same rows, only slower.
    :param conn_id: database connection for ``sort_by_primary_key``.
    :param aws_conn_id: AWS connection for S3 input and the staging bucket.
    :param chunk_size: target uncompressed chunk size, e.g. ``"256MB"`` or bytes.
    :param load_method: the load method the chunks are for; ``aurora_s3`` stages them uncompressed.
    :param compression: ``gzip`` or ``none``; default follows ``load_method``.
    :param compress_level: gzip level, 0-9 as zlib numbers them; chunks are compressed with
        ISA-L, whose levels are 0-3 (a higher number means its 3, about as small as zlib's 6).
        The default 1 is ISA-L's fast level: smaller than zlib's 1 at 2.5x its speed.
    :param grow_chunk_size: when the input would make more chunks than Airflow's
        ``core.max_map_length``, raise the chunk size instead of failing.
    :param temp_dir: local working directory (default: the system temp dir).
    :param duckdb_memory_limit: DuckDB's memory limit; it spills to ``temp_dir`` beyond it.
    :param duckdb_threads: DuckDB threads (default: all cores).
    :param check_temp_space: fail early when ``temp_dir`` lacks the estimated space.
    :param direct: load S3 input objects as they are stored, with no staged copy, when nothing
        needs rewriting (see :mod:`~airflow_bulkload.staging.direct`): with the ``client`` method,
        for CSV with no sort and no ``max_errors`` (on MySQL: ``sort_by_primary_key=False`` or
        ``"presorted"``; its stream is rewritten in flight where ``LOAD DATA`` reads CSV
        otherwise, see :mod:`~airflow_bulkload.dialects.mysql.stored_csv`). ``"auto"``
        (default) does so where it can and stages elsewhere; ``True`` also warns where it
        cannot; ``False`` always stages (staging also normalises CSV that
        COPY would read differently, e.g. a stray quote inside an unquoted value). Only
        ``manifest.json`` is written under the staging prefix when the input loads as stored.
    :param quoted_newlines: quoted values may hold line ends (default ``True``): direct objects
        are loaded whole. ``False`` declares they never do, and plain objects larger than the
        chunk size are cut into byte ranges (a cut inside a quoted value fails its load).
    :param staging_extra_args: S3 arguments for every object staging writes (chunks and
        manifests), as S3Hook's ``extra_args``; e.g. ``{"ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": "alias/etl"}`` for a bucket whose policy requires SSE-KMS. Keys S3 uploads
        do not take are refused before anything is read.
    :param max_errors: how many CSV records that do not read as ``file_format`` (too few or too
        many fields, bytes not in its encoding) staging sets aside instead of failing; they are
        written to a rejects file (source, line, column, error, message, record) and counted in
        the manifest and the load report. Over it, staging fails before writing any chunk. A
        quote that never closes always fails. Default 0: any such record fails staging.
        Values are not checked here: one its column does not take fails its chunk's load.
    :param reject_uri: an S3 folder (``s3://bucket/rejects/{{ ds }}/``) for the rejects files;
        default beside the chunks.
    """

    template_fields: Sequence[str] = (
        "source",
        "staging",
        "table",
        "conn_id",
        "file_format",
        "columns",
        "sort_key",
        "sort_key_types",
        "chunk_size",
        "load_method",
        "compression",
        "temp_dir",
        "direct",
        "staging_extra_args",
        "max_errors",
        "reject_uri",
    )
    ui_color = "#fff2cc"

    def __init__(
        self,
        *,
        source: str | list[str],
        staging: str,
        table: str,
        file_format: dict[str, Any] | None = None,
        columns: list[str] | None = None,
        sort_key: list[str] | None = None,
        sort_key_types: dict[str, str] | list[str] | None = None,
        sort_by_primary_key: bool | str = False,
        conn_id: str | None = None,
        aws_conn_id: str | None = "aws_default",
        chunk_size: str | int = DEFAULT_CHUNK_SIZE,
        load_method: str = "client",
        compression: str | None = None,
        compress_level: int = 1,
        grow_chunk_size: bool = False,
        direct: bool | str = "auto",
        quoted_newlines: bool = True,
        staging_extra_args: dict[str, Any] | None = None,
        max_errors: int | str = 0,
        reject_uri: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.staging = staging
        self.table = table
        self.file_format = file_format
        self.columns = columns
        self.sort_key = sort_key
        self.sort_key_types = sort_key_types
        self.sort_by_primary_key = sort_by_primary_key
        self.conn_id = conn_id
        self.aws_conn_id = aws_conn_id
        self.chunk_size = chunk_size
        self.load_method = load_method
        self.compression = compression
        self.compress_level = compress_level
        self.grow_chunk_size = grow_chunk_size
        self.direct = direct
        self.quoted_newlines = quoted_newlines
        self.staging_extra_args = staging_extra_args
        self.max_errors = max_errors
        self.reject_uri = reject_uri

    def validate(self) -> None:
        """Refuse contradictory or unknown sort options (``ValueError``); run by ``execute``."""
        if self.sort_by_primary_key not in (True, False, "auto", PRESORTED):
            raise ValueError(
                "sort_by_primary_key must be True, False or 'auto' (or 'presorted' for input "
                f"already in key order), got {self.sort_by_primary_key!r}"
            )
        if self.sort_by_primary_key and self.sort_key:
            raise ValueError("give either sort_key or sort_by_primary_key, not both")
        if self.sort_by_primary_key and not self.conn_id:
            raise ValueError("sort_by_primary_key needs conn_id to read the table's primary key")
        parse_flag(self.direct, "direct")
        check_upload_args({} if self.staging_extra_args is None else self.staging_extra_args)
        self._max_errors()
        if self.reject_uri and not (
            self.reject_uri.startswith("s3://") and self.reject_uri.endswith("/")
        ):
            raise ValueError(
                f"reject_uri must be an S3 folder (s3://bucket/path/): {self.reject_uri!r}"
            )
        sources = [self.source] if isinstance(self.source, str) else list(self.source)
        folders = [s.split("*")[0].rsplit("/", 1)[0] + "/" for s in sources]
        if self.reject_uri and any(self.reject_uri.startswith(f) for f in folders):
            raise ValueError(
                f"reject_uri {self.reject_uri} lies under the input {sources}: the next run "
                "would read the rejects files as input"
            )

    def _max_errors(self) -> int:
        if isinstance(self.max_errors, bool):
            raise ValueError(f"max_errors must be a whole number, got {self.max_errors!r}")
        value = parse_optional_int(self.max_errors, "max_errors") or 0
        if value < 0:
            raise ValueError(f"max_errors must be 0 or more, got {value}")
        return value

    def _direct(self) -> bool:
        """Whether staging may load the input as stored: the method's side of the decision.

        Both engines' ``client`` loaders read CSV as staging does (MySQL's through
        :mod:`~airflow_bulkload.dialects.mysql.stored_csv`); the input's side is planning's.
        """
        wanted = parse_flag(self.direct, "direct")
        if wanted is False:
            return False
        reasons = []
        if self.load_method != "client":
            reasons.append(f"the {self.load_method} method loads staged chunks")
        if not self.conn_id:
            reasons.append("no conn_id to read the table's columns from")
        if reasons:
            # "auto" stages quietly where it cannot load as stored; an explicit True is told why
            say = self.log.warning if wanted else self.log.info
            say("the input is staged, not loaded as stored: %s", "; ".join(reasons))
        return not reasons

    def _presorted_key(self) -> list[str]:
        """The table's primary key, when the input is declared to be in its order."""
        if self.sort_by_primary_key != PRESORTED:
            return []
        from airflow_bulkload.hooks.bulk_load import BulkLoadHook

        key = BulkLoadHook(conn_id=str(self.conn_id)).primary_key(self.table)
        if not key:
            self.log.warning("%s has no primary key: 'presorted' declares no order", self.table)
            return []
        self.log.info(
            "not sorting: the input is declared in the order of %s's key %s", self.table, key
        )
        return key

    def _sort_key(self) -> tuple[list[str], list[str]]:
        if self.sort_by_primary_key == PRESORTED:
            return [], []
        if self.sort_by_primary_key:
            from airflow_bulkload.hooks.bulk_load import BulkLoadHook

            hook = BulkLoadHook(conn_id=str(self.conn_id))
            if self.sort_by_primary_key == "auto" and not hook.dialect.traits.clustered_primary_key:
                self.log.info(
                    "not sorting: %s stores rows in a heap, so key order does not pay for the "
                    "sort (InnoDB's clustered key does)",
                    hook.dialect.name,
                )
                return [], []
            # the saved key while an earlier attempt has the table stripped, so a re-run stages
            # exactly as the first attempt did (and finds its manifest)
            key = hook.primary_key(self.table)
            if not key:
                self.log.warning("%s has no primary key; staging unsorted", self.table)
                return [], []
            self.log.info("sorting by the primary key of %s: %s", self.table, key)
            return key, resolve_sort_types(key, hook.describe_table(self.table).column_types())
        key = list(self.sort_key or [])
        return key, resolve_sort_types(key, self.sort_key_types)

    def _table_key(self) -> tuple[list[str], dict[str, str] | None]:
        """The table's key (for each chunk's first/last key) and its loadable columns' types."""
        if not self.conn_id:
            return [], None
        from airflow_bulkload.hooks.bulk_load import BulkLoadHook

        hook = BulkLoadHook(conn_id=str(self.conn_id))
        info = hook.describe_table(self.table)
        # the saved key while an earlier attempt has the table stripped
        key = hook.primary_key(self.table) or probe_key_of(info)
        return key, loadable_column_types(info)

    def execute(self, context: Context) -> list[dict[str, Any]]:
        result = self.stage(context)
        return [chunk.to_dict() for chunk in result.chunks]

    def stage(self, context: Context, group_bytes: int | None = None) -> StageResult:
        """Stage (or plan the groups of) the input; push the manifest's URI."""
        validate_or_fail(self.validate)
        compression = self.compression or ("none" if self.load_method == "aurora_s3" else "gzip")
        sort_key, sort_types = self._sort_key()
        probe_key, table_types = self._table_key()
        options = StagingOptions(
            file_format=FileFormat.from_dict(self.file_format),
            columns=list(self.columns) if self.columns else None,
            sort_key=sort_key,
            sort_types=sort_types,
            presorted_key=self._presorted_key(),
            chunk_size=parse_size(self.chunk_size),
            compression=compression,
            compress_level=self.compress_level,
            probe_key=probe_key,
            table_columns=list(table_types) if table_types is not None else None,
            table_types=table_types or {},
            direct=self._direct(),
            quoted_newlines=bool(parse_flag(self.quoted_newlines, "quoted_newlines")),
            upload_args=dict(self.staging_extra_args or {}),  # checked by validate()
            max_errors=self._max_errors(),
            reject_uri=self.reject_uri or None,
        )
        resources = self.staging_resources(
            max_map_length=airflow_max_map_length(),
            grow_chunk_size=self.grow_chunk_size,
        )
        run = run_segment(
            data_interval_start=context.get("data_interval_start"),
            data_interval_end=context.get("data_interval_end"),
            run_id=context.get("run_id"),
        )
        result = stage_input(
            self.source,
            s3=s3_client(self.aws_conn_id),
            staging_uri=self.staging,
            dag_id=context["dag"].dag_id,
            table=self.table,
            run=run,
            options=options,
            resources=resources,
            work_owner=work_owner(context),
            group_bytes=group_bytes,
        )
        context["ti"].xcom_push(key=MANIFEST_URI_XCOM_KEY, value=result.manifest_uri)
        return result
