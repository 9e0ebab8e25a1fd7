"""The benchmark's input as users hold it: gzip CSV parts in S3.

A moto S3 server runs in its own process on 127.0.0.1 (so the benchmark's own threads do not share
its interpreter), the generated dataset is written as ``N`` gzip CSV parts (each with a header) and
uploaded under one prefix, and every case reads those same objects: :func:`stream_part` yields a
part's decompressed bytes straight from S3, for the naive and floor sessions; :func:`download` gives
the tools that cannot read S3 (pgloader, mariadb-import) a local, gunzipped copy of the same parts.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.harness import MotoServer, free_port

if TYPE_CHECKING:
    from benchmarks.datasets import Dataset

BLOCK = 1 << 20  # bytes per S3 read


class MotoProcess:
    """``python -m moto.server`` on 127.0.0.1, in a process of its own (stopped by :meth:`close`)."""

    def __init__(self, log: Path) -> None:
        port = free_port()
        env = os.environ | {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        self.server = MotoServer(f"http://127.0.0.1:{port}")
        self._wait_until_up(port)

    def _wait_until_up(self, port: int, timeout: float = 60.0) -> None:
        import socket

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.process.returncode}")
            with closing(socket.socket()) as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"moto server did not come up on port {port}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def client(self) -> Any:
        return self.server.client("s3")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


@dataclass(frozen=True)
class S3Input:
    """The parts of one generated input: where they are in S3 and their local gzip copies."""

    endpoint_url: str
    bucket: str
    prefix: str  # ends with "/"
    keys: tuple[str, ...]
    local: tuple[Path, ...]  # the gzip files that were uploaded
    raw_bytes: int  # uncompressed size of all parts
    stored_bytes: int

    @property
    def uri(self) -> str:
        """The prefix as an ``s3://`` URI (what the pipeline's ``source`` takes)."""
        return f"s3://{self.bucket}/{self.prefix}"

    def client(self) -> Any:
        return MotoServer(self.endpoint_url).client("s3")


def write_parts(
    dataset: Dataset, rows: int, parts: int, out_dir: Path, *, seed: int = 7
) -> list[Path]:
    """``rows`` shuffled rows of ``dataset`` as ``parts`` gzip CSV files with a header each.

    The rows are shuffled once (the same order ``datasets.generate`` writes) into a DuckDB file in
    ``out_dir`` (it spills, so 50 M rows fit), then cut into consecutive slices."""
    import duckdb

    out_dir.mkdir(parents=True, exist_ok=True)
    store = out_dir / "generate.duckdb"
    store.unlink(missing_ok=True)
    con = duckdb.connect(str(store))
    try:
        con.execute("SET preserve_insertion_order = true")
        select = dataset.select_sql.format(rows=int(rows), seed=int(seed))
        con.execute(f"CREATE TABLE shuffled AS {select}")
        per_part = -(-rows // parts) if rows else 0
        paths = []
        for n in range(parts):
            path = out_dir / f"{dataset.name}-part-{n:03d}.csv.gz"
            target = str(path).replace("'", "''")
            # only integers are formatted in; the path is quoted for DuckDB
            con.execute(
                f"COPY (SELECT * FROM shuffled LIMIT {per_part} OFFSET {n * per_part}) "  # noqa: S608
                f"TO '{target}' (HEADER, DELIMITER ',', NULL '', COMPRESSION gzip)"
            )
            paths.append(path)
    finally:
        con.close()
        store.unlink(missing_ok=True)
    return paths


def raw_size(path: Path) -> int:
    """Uncompressed size of a gzip file (read through; ISIZE wraps at 4 GiB)."""
    total = 0
    with gzip.open(path, "rb") as f:
        while block := f.read(BLOCK):
            total += len(block)
    return total


def upload(moto: MotoServer, bucket: str, prefix: str, paths: Sequence[Path]) -> S3Input:
    """Put the parts under ``s3://bucket/prefix`` (as plain ``.csv.gz`` objects, no
    Content-Encoding, the way most exports store them)."""
    s3 = moto.client("s3")
    if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
        s3.create_bucket(Bucket=bucket)
    keys = []
    for path in paths:
        key = f"{prefix}{path.name}"
        s3.upload_file(str(path), bucket, key)
        keys.append(key)
    return S3Input(
        endpoint_url=moto.endpoint_url,
        bucket=bucket,
        prefix=prefix,
        keys=tuple(keys),
        local=tuple(paths),
        raw_bytes=sum(raw_size(p) for p in paths),
        stored_bytes=sum(p.stat().st_size for p in paths),
    )


def delete_prefix(moto: MotoServer, bucket: str, prefix: str) -> None:
    """Remove every object under ``prefix`` (frees the moto server's memory between sizes)."""
    s3 = moto.client("s3")
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys})


def gunzip_blocks(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """Decompress a gzip stream given in blocks (several gzip members in a row are fine)."""
    inflate = zlib.decompressobj(wbits=31)
    for block in blocks:
        while block:
            data = inflate.decompress(block)
            if data:
                yield data
            if not inflate.eof:
                break
            block = inflate.unused_data  # the next member, if any
            inflate = zlib.decompressobj(wbits=31)
    tail = inflate.flush()
    if tail:
        yield tail


def drop_first_line(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """The blocks without the first line (a CSV header: it holds no quoted newline)."""
    pending = b""
    for block in blocks:
        pending += block
        end = pending.find(b"\n")
        if end >= 0:
            if end + 1 < len(pending):
                yield pending[end + 1 :]
            break
    else:
        return
    yield from blocks


def stream_part(s3: Any, bucket: str, key: str, *, skip_header: bool = True) -> Iterator[bytes]:
    """A part's CSV bytes, read from S3 and gunzipped on the fly (nothing touches disk)."""
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    try:
        blocks = gunzip_blocks(body.iter_chunks(BLOCK))
        yield from drop_first_line(blocks) if skip_header else blocks
    finally:
        body.close()


def download(source: S3Input, out_dir: Path, pattern: str) -> list[Path]:
    """The parts fetched from S3 and gunzipped to local files named by ``pattern`` (``{n}``), for
    tools that cannot read S3. Cached by name."""
    out_dir.mkdir(parents=True, exist_ok=True)
    s3 = source.client()
    paths = []
    for n, key in enumerate(source.keys):
        target = out_dir / pattern.format(n=n)
        if not target.exists():
            partial = target.with_name(target.name + ".partial")
            with open(partial, "wb") as out:
                for block in stream_part(s3, source.bucket, key, skip_header=False):
                    out.write(block)
            partial.rename(target)
        paths.append(target)
    return paths


def remove(paths: Sequence[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
