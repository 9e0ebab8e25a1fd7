"""Finding the input files (local globs or S3 URIs/prefixes/globs) and fetching S3 ones to disk."""

from __future__ import annotations

import fnmatch
import glob
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from airflow_bulkload.compression import (
    DECOMPRESS_ERRORS,
    MAGIC_BYTES,
    codec_of,
    decompress_strictly,
)
from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.gzip_codec import GZIP_READ_ERRORS, gunzip_reader
from airflow_bulkload.s3io import parse_s3_uri, s3_error_code
from airflow_bulkload.staging.normalize import InputFormatError
from airflow_bulkload.staging.planning import SourceFile

_GLOB_CHARS = "*?["


class NoInputError(BulkLoadError):
    """A source pattern matched no file."""


def _has_glob(text: str) -> bool:
    return any(c in text for c in _GLOB_CHARS)


def list_local(pattern: str) -> list[SourceFile]:
    """Files matching a local path or glob (``**`` recurses), sorted by path."""
    paths = sorted(glob.glob(pattern, recursive=True)) if _has_glob(pattern) else [pattern]
    found: list[SourceFile] = []
    for name in paths:
        path = Path(name).absolute()
        if path.is_dir():
            continue
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        found.append(SourceFile(str(path), stat.st_size, str(stat.st_mtime_ns)))
    return found


def list_s3(uri: str, client: Any) -> list[SourceFile]:
    """Objects for an S3 object URI, a prefix (ending in ``/``) or a key glob, sorted by key.

    A prefix lists its own objects only, not those in nested "folders" (an ``archive/`` parked
    under the day's prefix is not input); a glob's ``*`` stays within one folder level, and
    ``**`` crosses levels (``s3://b/day/**/*.csv`` reads every ``.csv`` under ``day/``).
    """
    bucket, key = parse_s3_uri(uri)
    if _has_glob(key):
        literal = key[: min(key.index(c) for c in _GLOB_CHARS if c in key)]
        recursive = "**" in key
        return [
            s
            for s in _list_prefix(client, bucket, literal, recursive=True)
            if _key_matches(s, bucket, key, recursive)
        ]
    if key and not key.endswith("/"):
        exact = [s for s in _list_prefix(client, bucket, key, recursive=True) if s.location == uri]
        if exact:
            return exact
        key += "/"  # "s3://b/data" names the folder data/ when no such object exists
    return _list_prefix(client, bucket, key, recursive=False)


def _key_matches(source: SourceFile, bucket: str, pattern: str, recursive: bool) -> bool:
    key = source.location[len(f"s3://{bucket}/") :]
    if not recursive and key.count("/") != pattern.count("/"):
        return False
    return fnmatch.fnmatchcase(key, pattern.replace("**/", "*").replace("**", "*"))


def _list_prefix(client: Any, bucket: str, prefix: str, *, recursive: bool) -> list[SourceFile]:
    found: list[SourceFile] = []
    nested: list[str] = []
    paginator = client.get_paginator("list_objects_v2")
    extra = {} if recursive else {"Delimiter": "/"}
    try:
        pages = list(paginator.paginate(Bucket=bucket, Prefix=prefix, **extra))
    except Exception as exc:
        code = s3_error_code(exc)
        if code == "NoSuchBucket":
            raise NoInputError(
                f"source bucket {bucket!r} does not exist (source s3://{bucket}/{prefix}): check "
                "the bucket name and the AWS connection's account and region"
            ) from exc
        raise
    for page in pages:
        nested += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        for obj in page.get("Contents", []):
            key = obj["Key"]
            if key.endswith("/"):  # a "folder" marker, not data
                continue
            found.append(
                SourceFile(f"s3://{bucket}/{key}", int(obj["Size"]), str(obj["ETag"]).strip('"'))
            )
    if nested:
        import logging

        logging.getLogger(__name__).warning(
            "not reading %d nested folder(s) under s3://%s/%s (%s): a prefix names its own "
            "objects only; use a ** glob to read deeper",
            len(nested),
            bucket,
            prefix,
            ", ".join(nested[:3]),
        )
    return sorted(found, key=lambda s: s.location)


def resolve_sources(patterns: str | Sequence[str], s3_client: Any = None) -> list[SourceFile]:
    """Every input file the patterns name, in a stable order; each pattern must match something."""
    if isinstance(patterns, str):
        patterns = [patterns]
    if not patterns:
        raise NoInputError("no source given")
    found: dict[str, SourceFile] = {}
    for pattern in patterns:
        if pattern.startswith("s3://"):
            if s3_client is None:
                raise ValueError("an S3 client is needed for S3 sources")
            matched = list_s3(pattern, s3_client)
        else:
            matched = list_local(os.path.expanduser(pattern))
        if not matched:
            raise NoInputError(f"source {pattern!r} matched no files")
        for source in matched:
            found.setdefault(source.location, source)
    return list(found.values())


def _as_duckdb_reads_it(raw: Path, location: str) -> Path:
    """``raw`` renamed by its content (``.csv`` or ``.csv.gz``) for DuckDB's reader.

    zstd and bzip2 are decompressed to ``.csv`` (streamed, checked to their last byte, then the
    download removed): a damaged or cut object fails here, naming it.
    """
    with raw.open("rb") as handle:
        codec = codec_of(handle.read(MAGIC_BYTES))
    if codec in ("zstd", "bz2"):
        plain = raw.with_suffix(".csv")
        try:
            with raw.open("rb") as packed, plain.open("wb") as out:
                decompress_strictly(packed, out, codec)
        except DECOMPRESS_ERRORS as exc:
            raise InputFormatError(
                f"{location}: its {codec} data does not decompress ({exc})"
            ) from exc
        raw.unlink()
        return plain
    named = raw.with_suffix(".csv.gz" if codec == "gzip" else ".csv")
    raw.rename(named)
    return named


def holds_text(path: Path) -> bool:
    """Whether a staged-for-DuckDB input file has any content (an empty gzip has none)."""
    if not path.stat().st_size:
        return False
    if path.suffix != ".gz":
        return True
    with path.open("rb") as packed:
        try:
            return bool(gunzip_reader(packed).read(1))
        except GZIP_READ_ERRORS:
            return True  # DuckDB's read says what is wrong with it, naming the object


def materialize(
    sources: Iterable[SourceFile], work_dir: Path, s3_client: Any = None, log: Any = None
) -> list[Path]:
    """Local paths DuckDB can read, one per source, named by content (``.csv``, ``.csv.gz``...).

    S3 objects are downloaded (boto3's managed transfer: multipart, bounded memory); local files
    are linked, not copied. The name's extension follows the magic bytes, not the source name.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for number, source in enumerate(sources):
        raw = work_dir / f"input-{number:06d}.raw"
        if source.is_s3:
            bucket, key = parse_s3_uri(source.location)
            if log is not None:
                log.info("downloading %s (%d bytes)", source.location, source.size)
            _download_as_listed(s3_client, source, bucket, key, raw)
        else:
            raw.symlink_to(source.location)
        paths.append(_as_duckdb_reads_it(raw, source.location))
    return paths


def _download_as_listed(
    s3_client: Any, source: SourceFile, bucket: str, key: str, to: Path
) -> None:
    """Download the object as it was listed (its ETag), or fail: the fingerprint names it.

    Between listing and download (a mapped staging group may wait in a queue for a while) the
    object can be overwritten; staging the new bytes under the old fingerprint would load an
    input nobody planned. One streamed GET pinned with ``IfMatch``; memory stays one buffer.
    """
    try:
        body = s3_client.get_object(Bucket=bucket, Key=key, IfMatch=f'"{source.version}"')["Body"]
    except Exception as exc:
        if s3_error_code(exc) in ("PreconditionFailed", "412"):
            raise BulkLoadError(
                f"{source.location} changed after staging listed it (ETag {source.version}); "
                "clear the stage task to plan the input again"
            ) from exc
        raise
    try:
        with open(to, "wb") as out:
            shutil.copyfileobj(body, out, 1024 * 1024)
    finally:
        body.close()


@contextmanager
def open_source(location: str, client: Any) -> Iterator[BinaryIO]:
    """An input file, local or in S3, as it is stored (compressed or not), for reading."""
    if not location.startswith("s3://"):
        with open(location, "rb") as local:
            yield local
        return
    bucket, key = parse_s3_uri(location)
    body = client.get_object(Bucket=bucket, Key=key)["Body"]
    try:
        yield body
    finally:
        body.close()
