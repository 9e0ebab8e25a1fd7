"""The hand-written client of the naive and floor cases: CSV parts streamed from S3 into the
database, in a process of its own (so its peak RSS is its own and it shares no interpreter with
the benchmark's samplers).

``--sessions 1 --one-statement``: one session, ONE load statement (COPY FROM STDIN / LOAD DATA
LOCAL) fed every part in turn (the naive case). ``--sessions N``: N sessions, each taking the next
part and loading it with a statement of its own until none is left (the floor's load phase).
Every part is read with a GET and gunzipped on the fly; its header line is dropped.

Prints one JSON line: the seconds from the first GET to the last commit (interpreter start-up and
imports not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import closing, suppress
from typing import Any

from benchmarks.s3data import stream_part
from tests.harness import MotoServer, ServerSettings, TestDatabase

#: what the MySQL statement names its FIFO by (``engines.FIFO_PLACEHOLDER``)
FIFO_PLACEHOLDER = "@FIFO@"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", required=True, help="JSON: engine, server, database, dataset, …")
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--one-statement", action="store_true")
    return parser.parse_args(argv)


def spec_for(
    db: TestDatabase, statement: str, endpoint_url: str, bucket: str, keys: list[str]
) -> str:
    """The ``--spec`` argument for loading ``keys`` into ``db`` with ``statement``."""
    return json.dumps(
        {
            "engine": db.engine,
            "server": vars(db.server),
            "database": db.name,
            "statement": statement,
            "endpoint_url": endpoint_url,
            "bucket": bucket,
            "keys": keys,
        }
    )


def copy_stream(db: TestDatabase, statement: str, blocks: Iterable[bytes]) -> None:
    """PostgreSQL: ``COPY ... FROM STDIN`` through psycopg, written block by block (autocommit:
    the statement is its own transaction)."""
    with closing(db.connect()) as conn, conn.cursor() as cur, cur.copy(statement) as copy:
        for block in blocks:
            copy.write(block)


def load_data_stream(db: TestDatabase, statement: str, blocks: Iterable[bytes]) -> None:
    """MySQL: ``LOAD DATA LOCAL INFILE`` through MySQLdb from a FIFO that a thread fills with
    ``blocks`` (as the project's MySQL loader does)."""
    workdir = tempfile.mkdtemp(prefix="bench-fifo-")
    fifo = os.path.join(workdir, "part.fifo")
    os.mkfifo(fifo, 0o600)
    writer = FifoWriter(fifo, iter(blocks))
    writer.start()
    try:
        with closing(db.connect(local_infile=True)) as conn:
            cur = conn.cursor()
            cur.execute(statement.replace(FIFO_PLACEHOLDER, fifo))
            cur.close()
    finally:
        writer.release()
        shutil.rmtree(workdir, ignore_errors=True)
    if writer.error is not None:
        raise writer.error


class FifoWriter(threading.Thread):
    """Writes ``blocks`` into the FIFO ``LOAD DATA LOCAL INFILE`` reads; keeps its error."""

    def __init__(self, path: str, blocks: Iterator[bytes]) -> None:
        super().__init__(name="bench-fifo-writer", daemon=True)
        self.path = path
        self.blocks = blocks
        self.error: BaseException | None = None
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY)  # until the client (or release()) opens it
        except OSError as exc:
            self.error = exc
            return
        try:
            for block in self.blocks:
                if self._stopping.is_set():
                    return
                view = memoryview(block)
                while view:
                    view = view[os.write(fd, view) :]
        except BaseException as exc:  # kept for the loading thread
            self.error = exc
        finally:
            os.close(fd)

    def release(self, timeout: float = 60.0) -> None:
        """Make sure the thread ends: open and drain the read end if the client stopped."""
        if not self.is_alive():
            return
        self._stopping.set()
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        deadline = time.monotonic() + timeout
        try:
            while self.is_alive() and time.monotonic() < deadline:
                with suppress(BlockingIOError):
                    os.read(fd, 1 << 16)
                self.join(0.02)
        finally:
            os.close(fd)


def run(spec: dict[str, Any], sessions: int, one_statement: bool) -> float:
    load = copy_stream if spec["engine"] == "postgres" else load_data_stream
    statement = spec["statement"]
    db = TestDatabase(
        spec["engine"], ServerSettings(**spec["server"]), spec["database"], conn_id="unused"
    )
    moto = MotoServer(spec["endpoint_url"])
    bucket, keys = spec["bucket"], list(spec["keys"])
    clients = [moto.client("s3") for _ in range(max(1, sessions))]  # one per session
    started = time.monotonic()
    if one_statement:

        def every_part() -> Iterator[bytes]:
            for key in keys:
                yield from stream_part(clients[0], bucket, key)

        load(db, statement, every_part())
        return time.monotonic() - started

    todo: queue.SimpleQueue[str] = queue.SimpleQueue()
    for key in keys:
        todo.put(key)
    errors: list[BaseException] = []

    def session(s3: Any) -> None:
        try:
            while not errors:
                try:
                    key = todo.get_nowait()
                except queue.Empty:
                    return
                load(db, statement, stream_part(s3, bucket, key))
        except BaseException as exc:  # re-raised by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(s3,)) for s3 in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    seconds = run(json.loads(args.spec), args.sessions, args.one_statement)
    print(json.dumps({"seconds": seconds}))


if __name__ == "__main__":
    main()
