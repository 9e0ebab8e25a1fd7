"""`make demo`: the example PostgreSQL pipeline end to end, on embedded defaults.

What it does, all on this machine:
  1. a throwaway AIRFLOW_HOME (SQLite) and a moto S3 server on 127.0.0.1, in this process;
  2. a generated input: BULKLOAD_DEMO_ROWS rows (default 2,000,000) of orders with a bigint key,
     text and timestamps, shuffled, in 4 CSV files under s3://bulkload-demo-input/events/<date>/;
  3. a fresh database `bulkload_demo` on the local PostgreSQL with the target table (primary key
     and two secondary indexes);
  4. `airflow dags test bulkload_nightly_postgres <date>`: the example DAG, for real;
  5. a summary: rows loaded, time per stage, rows/s, and whether the table's indexes, its
     autovacuum setting and the server's settings are back as they were.

BULKLOAD_DEMO_CHUNK_SIZE sets the staged chunk size (default 32MB, several chunks).
Point it at your own server with BULKLOAD_DEMO_PG_HOST / _PORT / _USER / _PASSWORD (the user must
be allowed CREATE DATABASE, and ALTER SYSTEM and CHECKPOINT unless bulk mode is off).
BULKLOAD_DEMO_BULK_MODE=off leaves the server's settings alone (no ALTER SYSTEM): the safe first
contact with a shared server. BULKLOAD_DEMO_DATABASE names the database (default bulkload_demo);
the demo drops and creates it, and refuses a database it did not create itself.
BULKLOAD_DEMO_KEEP=1 keeps the database.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LOGICAL_DATE = "2026-11-21"
DATABASE = os.environ.get("BULKLOAD_DEMO_DATABASE") or "bulkload_demo"
#: the comment the demo puts on its database; a database without it is never dropped
DEMO_MARK = "airflow_bulkload make demo: dropped and created by every run"
TABLE = "public.events"
INPUT_BUCKET = "bulkload-demo-input"
STAGING_BUCKET = "bulkload-demo-staging"
BULK_SETTINGS = ("max_wal_size", "checkpoint_timeout", "maintenance_work_mem")


def env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def pg_settings() -> dict[str, Any]:
    return {
        "host": env("BULKLOAD_DEMO_PG_HOST", "127.0.0.1"),
        "port": int(env("BULKLOAD_DEMO_PG_PORT", "5432")),
        "user": env("BULKLOAD_DEMO_PG_USER", "postgres"),
        "password": os.environ.get("BULKLOAD_DEMO_PG_PASSWORD", ""),
    }


def pg_connect(dbname: str) -> Any:
    import psycopg

    s = pg_settings()
    return psycopg.connect(
        host=s["host"],
        port=s["port"],
        user=s["user"],
        password=s["password"] or None,
        dbname=dbname,
        autocommit=True,
        connect_timeout=5,
    )


def snapshot(conn: Any) -> dict[str, Any]:
    """What the load must leave as it found: index definitions, reloptions, server settings."""
    indexes = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
        "AND tablename = 'events' ORDER BY indexname"
    ).fetchall()
    reloptions = conn.execute(
        "SELECT reloptions FROM pg_class WHERE oid = 'public.events'::regclass"
    ).fetchone()
    settings = {
        name: conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]
        for name in BULK_SETTINGS
    }
    return {"indexes": indexes, "reloptions": reloptions[0], "settings": settings}


def main() -> int:
    from moto.server import ThreadedMotoServer
    from psycopg import sql

    from benchmarks.datasets import WIDE, generate
    from benchmarks.engines import ENGINES, duckdb_checksum
    from benchmarks.summary import parse_report_line
    from tests.harness import free_port

    rows = int(env("BULKLOAD_DEMO_ROWS", "2000000"))
    work = Path(tempfile.mkdtemp(prefix="bulkload-demo-"))
    home = work / "airflow-home"
    home.mkdir()
    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's access log
    moto.start()
    endpoint = f"http://127.0.0.1:{port}"
    conn_id = "bulkload_demo_pg"
    s = pg_settings()
    child_env = os.environ.copy() | {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AWS_ACCESS_KEY_ID": "demo",
        "AWS_SECRET_ACCESS_KEY": "demo",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(
            {"conn_type": "aws", "extra": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
        ),
        f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(
            {
                "conn_type": "postgres",
                "host": s["host"],
                "port": s["port"],
                "login": s["user"],
                "password": s["password"],
                "schema": DATABASE,
            }
        ),
        "BULKLOAD_EXAMPLE_PG_CONN": conn_id,
        "BULKLOAD_EXAMPLE_INPUT": f"s3://{INPUT_BUCKET}",
        "BULKLOAD_EXAMPLE_STAGING": f"s3://{STAGING_BUCKET}",
        "BULKLOAD_EXAMPLE_PG_TABLE": TABLE,
        "BULKLOAD_EXAMPLE_BULK_MODE": env("BULKLOAD_DEMO_BULK_MODE", "auto"),
        # several chunks, so the load runs in parallel here too (pre-flight notes that they are
        # below the 100 MB it recommends on a real server)
        "BULKLOAD_EXAMPLE_CHUNK_SIZE": env("BULKLOAD_DEMO_CHUNK_SIZE", "32MB"),
    }
    os.environ.update(
        {
            k: child_env[k]
            for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
        }
    )
    drop_database = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
        sql.Identifier(DATABASE)
    )
    created = False
    try:
        import boto3

        print(f"demo: generating {rows:,} shuffled rows in 4 CSV files ...", flush=True)
        files = generate(WIDE, rows, work / "input", files=4)
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        for bucket in (INPUT_BUCKET, STAGING_BUCKET):
            s3.create_bucket(Bucket=bucket)
        for path in files:
            s3.upload_file(str(path), INPUT_BUCKET, f"events/{LOGICAL_DATE}/{path.name}")
        # every part of the checksum is a count or a sum: the files' checksums add up
        expected = tuple(map(sum, zip(*(duckdb_checksum(WIDE, p) for p in files), strict=True)))

        with closing(pg_connect("postgres")) as admin:
            refuse_a_database_not_ours(admin)
            admin.execute(drop_database)
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
            created = True
            admin.execute(
                sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                    sql.Identifier(DATABASE), sql.Literal(DEMO_MARK)
                )
            )
        with closing(pg_connect(DATABASE)) as conn:
            table = sql.Identifier(*TABLE.split("."))
            conn.execute(sql.SQL(WIDE.postgres_ddl).format(table=table))
            for cols in WIDE.index_columns:
                conn.execute(
                    sql.SQL("CREATE INDEX {} ON {} ({})").format(
                        sql.Identifier(f"events_{'_'.join(cols)}_idx"),
                        table,
                        sql.SQL(", ").join(map(sql.Identifier, cols)),
                    )
                )
            before = snapshot(conn)

        print("demo: migrating a throwaway Airflow metadata DB ...", flush=True)
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            env=child_env,
            check=True,
            capture_output=True,
        )
        print(f"demo: airflow dags test bulkload_nightly_postgres {LOGICAL_DATE} ...", flush=True)
        log_path = work / "dags-test.log"
        started = time.monotonic()
        with open(log_path, "w") as log:
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "airflow",
                    "dags",
                    "test",
                    "bulkload_nightly_postgres",
                    LOGICAL_DATE,
                ],
                env=child_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
            )
        wall = time.monotonic() - started
        output = log_path.read_text(errors="replace")
        if run.returncode != 0 or "state=success" not in output.replace(
            "state: success", "state=success"
        ):
            print(output[-6000:])
            print(f"demo: the DAG run failed (log above; full log in {log_path})")
            return 1

        with closing(pg_connect(DATABASE)) as conn:
            loaded = conn.execute(ENGINES["postgres"].checksum_query(WIDE, "events")).fetchone()
            after = snapshot(conn)
        report = parse_report_line(output) or {}
        print_summary(rows, wall, expected, loaded, before, after, report)
        ok = tuple(map(int, expected)) == tuple(map(int, loaded)) and before == after
        return 0 if ok else 1
    finally:
        moto.stop()
        if not os.environ.get("BULKLOAD_DEMO_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
        if created and not os.environ.get("BULKLOAD_DEMO_KEEP"):
            try:
                with closing(pg_connect("postgres")) as admin:
                    admin.execute(drop_database)
            except Exception as exc:  # the summary above already said what matters
                print(f"demo: could not drop {DATABASE}: {exc}")


def refuse_a_database_not_ours(admin: Any) -> None:
    """Stop before dropping a database that exists without the demo's mark."""
    row = admin.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        (DATABASE,),
    ).fetchone()
    if row is not None and row[0] != DEMO_MARK:
        raise SystemExit(
            f"demo: database {DATABASE!r} exists and was not created by the demo: not dropping "
            "it. Set BULKLOAD_DEMO_DATABASE to a name that is free."
        )


def print_summary(
    rows: int, wall: float, expected: Any, loaded: Any, before: dict, after: dict, report: dict
) -> None:
    same = tuple(map(int, expected)) == tuple(map(int, loaded))
    print()
    print(
        f"rows loaded        {int(loaded[0]):>12,}  (input {rows:,}; checksum {'equal' if same else 'DIFFERENT'})"
    )
    stages = report.get("stage_seconds") or {}
    for name, seconds in stages.items():
        print(f"  {name:<16} {'-' if seconds is None else f'{seconds:8.2f} s'}")
    if report.get("rows_per_second"):
        print(f"load stage         {report['rows_per_second']:>12,.0f} rows/s")
    print(f"airflow dags test  {wall:>10.1f} s end to end (incl. Airflow start-up)")
    print(
        f"indexes            {'as before' if before['indexes'] == after['indexes'] else 'CHANGED'} ({len(after['indexes'])})"
    )
    print(
        f"autovacuum/reloptions {'as before' if before['reloptions'] == after['reloptions'] else 'CHANGED'} ({after['reloptions']})"
    )
    print(
        f"server settings    {'as before' if before['settings'] == after['settings'] else 'CHANGED'} ({after['settings']})"
    )


if __name__ == "__main__":
    sys.exit(main())
