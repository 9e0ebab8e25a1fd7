"""Where PostgreSQL's index phase goes: the floor's builds against what finalize does.

``python -m benchmarks.index_profile --rows 10000000`` loads the ``classic`` dataset once into an
unindexed table (COPY from a local CSV: this profiles the index phase, not the load), then times
on that same table:

- the first full scan after the load, which sets every tuple's hint bits (the first index build
  pays it in the floor and in the pipeline alike);
- the floor's index phase (the primary key as a unique index and the two secondary indexes, one
  session each, all at once, then ``ADD CONSTRAINT ... PRIMARY KEY USING INDEX``) under each
  combination of ``maintenance_work_mem`` and ``max_parallel_maintenance_workers`` that the floor
  (the server's defaults) and finalize (bulk mode's ``maintenance_work_mem``, no per-index
  workers) use;
- ``ANALYZE`` and ``CHECKPOINT``, which finalize adds (the pipeline's finalize ends with the checkpoint).

Every round drops the indexes first; the table is dropped at the end.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import closing
from functools import partial
from pathlib import Path

from psycopg import sql

from benchmarks.cases import in_parallel, timed
from benchmarks.datasets import CLASSIC, generate
from benchmarks.engines import ENGINES, TABLE, index_name
from tests.harness import ServerSettings, TestDatabase, fresh_database

#: (maintenance_work_mem, max_parallel_maintenance_workers); None keeps the server's value
ROUNDS: list[tuple[str | None, int | None]] = [
    (None, None),  # the floor: the server's defaults
    (None, 0),
    ("1GB", 0),  # finalize under bulk mode
    ("1GB", None),
    ("256MB", 0),
]


def _build_all(
    db: TestDatabase, statements: list[str], mwm: str | None, workers: int | None
) -> float:
    def build(statement: str) -> None:
        with closing(db.connect(autocommit=True)) as conn:
            if mwm is not None:
                conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (mwm,))
            if workers is not None:
                conn.execute(
                    "SELECT set_config('max_parallel_maintenance_workers', %s, false)",
                    (str(workers),),
                )
            conn.execute(statement)

    return timed(lambda: in_parallel([partial(build, s) for s in statements]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=2, help="passes over the rounds")
    args = parser.parse_args()
    engine = ENGINES["postgres"]
    with (
        tempfile.TemporaryDirectory() as work,
        fresh_database("postgres", ServerSettings.postgres(), prefix="bl_profile") as db,
    ):
        [csv_path] = generate(CLASSIC, args.rows, Path(work))
        engine.create_table(db, CLASSIC, indexed=False)
        started = time.monotonic()
        engine.run_client(db, f"\\copy {TABLE} FROM pstdin (FORMAT csv, HEADER true)", csv_path)
        print(f"{args.rows:,} rows loaded in {time.monotonic() - started:.2f} s")
        started = time.monotonic()
        db.query(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(TABLE)).as_string(None))
        print(f"first scan (hint bits): {time.monotonic() - started:.2f} s")
        builds, attach = engine.index_phases(CLASSIC)
        names = [f"{TABLE}_pkey", *(index_name(cols) for cols in CLASSIC.index_columns)]
        for mwm, workers in [r for _ in range(args.repeat) for r in ROUNDS]:
            for name in names:
                db.query(
                    sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)).as_string(None)
                )
            seconds = _build_all(db, builds, mwm, workers)
            started = time.monotonic()
            for statement in attach:
                db.query(statement)
            attached = time.monotonic() - started
            db.query(
                sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}")
                .format(sql.Identifier(TABLE), sql.Identifier(f"{TABLE}_pkey"))
                .as_string(None)
            )
            print(
                f"3 builds at once, maintenance_work_mem {mwm or 'server'}, "
                f"max_parallel_maintenance_workers {workers if workers is not None else 'server'}: "
                f"{seconds:.2f} s (+ attach PK {attached:.2f} s)"
            )
        started = time.monotonic()
        db.query(sql.SQL("ANALYZE {}").format(sql.Identifier(TABLE)).as_string(None))
        print(f"ANALYZE: {time.monotonic() - started:.2f} s")
        started = time.monotonic()
        db.query("CHECKPOINT")
        print(f"CHECKPOINT: {time.monotonic() - started:.2f} s")


if __name__ == "__main__":
    main()
