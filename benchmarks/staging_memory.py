"""Stage a generated input of a given size to S3 and print the worker's peak memory (RSS).

Proves that staging memory is bounded by DuckDB's ``memory_limit`` plus a small constant, not by
the input size. S3 is a moto server in its own process (so the objects it holds in memory do not
count against the staging process); every mode runs in a fresh subprocess so its peak RSS is its own.

    .venv/bin/python -m benchmarks.staging_memory --size 2GB
    .venv/bin/python -m benchmarks.staging_memory --size 300MB --memory-limit 512MB

Measured (2 cores, ``wide`` dataset, one plain CSV input, DuckDB memory_limit 512MB, gzip level 1,
256 MB chunks, moto server on the same machine; peak RSS = the staging process's VmHWM, of which
about 140 MB is the Python/Airflow/boto3/DuckDB imports):

=========  ============  =======  =========  ==============  ======  ===========
input      mode          seconds  peak RSS   DuckDB step     chunks  stored
=========  ============  =======  =========  ==============  ======  ===========
282 MB     unsorted      6.9      258 MB     about 2 s       2       108 MB
282 MB     sorted, gz 6  20.7     697 MB     6.4 s           2       83 MB
1.93 GB    unsorted      63.2     290 MB     15.3 s          8       736 MB
1.93 GB    sorted by id  68.4     716 MB     28.8 s          8       667 MB
=========  ============  =======  =========  ==============  ======  ===========

Peak memory does not grow with the input (282 MB -> 1.93 GB: +32 MB unsorted, +19 MB sorted); sorted
runs sit at DuckDB's memory_limit plus the baseline. The rest of the time is the Python splitter
(record boundaries, gzip, sha256) at about 40-55 MB/s; gzip level 6 made it 2.6x slower for 17 %
smaller chunks (282 MB unsorted: 17.8 s, 93 MB stored), hence level 1 by default.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from benchmarks.memory import peak_rss_kib

WIDE_ROW_BYTES = 70  # about, for the `wide` dataset: turns a target size into a row count


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with closing(socket.socket()) as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"moto server did not come up on port {port}")


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """One staging run in this process; returns its figures (called in a subprocess)."""
    import boto3

    from airflow_bulkload.staging.manifest import FileFormat
    from airflow_bulkload.staging.planning import parse_size
    from airflow_bulkload.staging.stager import Resources, StagingOptions, stage

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr, force=True
    )
    s3 = boto3.client(
        "s3",
        endpoint_url=args.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    started = time.monotonic()
    result = stage(
        args.input,
        s3=s3,
        staging_uri=f"s3://{args.bucket}/staging",
        dag_id="benchmark",
        table="public.wide",
        run=args.mode,
        options=StagingOptions(
            file_format=FileFormat(header=True),
            sort_key=["id"] if args.mode == "sorted" else [],
            sort_types=["BIGINT"] if args.mode == "sorted" else [],
            chunk_size=parse_size(args.chunk_size),
            compress_level=args.compress_level,
        ),
        resources=Resources(temp_dir=args.temp_dir, memory_limit=args.memory_limit),
    )
    return {
        "mode": args.mode,
        "seconds": round(time.monotonic() - started, 1),
        "peak_rss_mb": round(peak_rss_kib() / 1024, 1),
        "rows": result.manifest.total_rows,
        "chunks": len(result.manifest.chunks),
        "input_mb": round(result.manifest.source_bytes / 1e6, 1),
        "stored_mb": round(result.manifest.total_bytes / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="2GB", help="input size to generate, e.g. 300MB")
    parser.add_argument("--memory-limit", default="512MB", help="DuckDB memory_limit")
    parser.add_argument("--chunk-size", default="256MB")
    parser.add_argument("--compress-level", type=int, default=1)
    parser.add_argument("--modes", default="unsorted,sorted")
    parser.add_argument("--work", type=Path, default=None, help="scratch dir (default: a temp dir)")
    # internal: run one mode in this process
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--bucket", help=argparse.SUPPRESS)
    parser.add_argument("--temp-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args)))
        return

    from airflow_bulkload.staging.planning import parse_size
    from benchmarks.datasets import DATASETS, generate

    work = Path(args.work or tempfile.mkdtemp(prefix="bulkload-staging-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = parse_size(args.size) // WIDE_ROW_BYTES
    print(f"generating about {args.size} ({rows} rows) in {work} ...", file=sys.stderr)
    [data] = generate(DATASETS["wide"], rows, work / "input")
    print(f"input: {data.stat().st_size / 1e6:.1f} MB", file=sys.stderr)

    port = _free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        _wait_for(port)
        endpoint = f"http://127.0.0.1:{port}"
        import boto3

        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket="bench")
        results = []
        for mode in args.modes.split(","):
            command = [
                sys.executable,
                "-m",
                "benchmarks.staging_memory",
                "--one",
                f"--mode={mode}",
                f"--input={data}",
                f"--endpoint={endpoint}",
                "--bucket=bench",
                f"--temp-dir={work / 'tmp'}",
                f"--memory-limit={args.memory_limit}",
                f"--chunk-size={args.chunk_size}",
                f"--compress-level={args.compress_level}",
            ]
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                raise SystemExit(f"{mode} run failed")
            sys.stderr.write(done.stderr)
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"memory_limit={args.memory_limit} chunk_size={args.chunk_size}")
        for result in results:
            print(json.dumps(result))
    finally:
        moto.terminate()
        moto.wait(timeout=30)
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
