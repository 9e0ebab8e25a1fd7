"""Drive an example DAG end to end, the way a user does: ``airflow dags test`` in a subprocess.

:class:`ExampleLoad` sets up what the example DAG reads (input files in the moto S3 server, a
target table with a primary key, two secondary indexes and a storage parameter, connections),
runs the DAG for a logical date (optionally killed with -9 at a chosen point, see
``kill_points.py``), and checks the end state: rows and checksum equal the source, the table's
definition, reloptions and server settings equal the originals, every chunk in the ledger once,
no bulk-mode lease left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_bulkload.staging.manifest import ChunkSpec
from benchmarks.datasets import WIDE, generate
from benchmarks.engines import ENGINES, duckdb_checksum
from tests.e2e.airflow_cluster import write_local_settings
from tests.harness import REPO_ROOT, MotoServer, TestDatabase, _pg_admin

DAG_IDS = {"postgres": "bulkload_nightly_postgres", "mysql": "bulkload_nightly_aurora_mysql"}
#: where each example DAG looks for a day's input: s3://<input bucket>/<folder>/<ds>/
INPUT_FOLDERS = {"postgres": "events", "mysql": "orders"}
TABLE_NAME = "events"
RUN_TIMEOUT = int(os.environ.get("BULKLOAD_TEST_RUN_TIMEOUT", "300"))

SETTINGS = {
    "postgres": ("max_wal_size", "checkpoint_timeout", "maintenance_work_mem"),
    "mysql": ("innodb_io_capacity", "innodb_io_capacity_max"),
}


def install_kill_points(airflow_home: Path) -> None:
    """Make ``kill_points.task_policy`` the cluster policy of the test Airflow home."""
    write_local_settings(
        airflow_home, "from tests.e2e.kill_points import task_policy  # noqa: F401\n"
    )


@dataclass
class RunResult:
    returncode: int
    output: str

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0 and "state=success" in self.output.replace(
            "state: success", "state=success"
        )

    @property
    def killed(self) -> bool:
        return self.returncode == -9

    def tail(self, chars: int = 6000) -> str:
        return self.output[-chars:]


@dataclass
class ExampleLoad:
    """One engine's example DAG, its input and its target table."""

    db: TestDatabase
    moto: MotoServer
    workdir: Path
    rows: int = 30_000
    files: int = 3
    chunk_size: str = "300KB"
    input_bucket: str = "bl-e2e-input"
    staging_bucket: str = "bl-e2e-staging"
    dates: dict[str, list[Path]] = field(default_factory=dict)
    runs: int = 0
    #: a DAG of the test's own that loads this table, instead of the engine's example DAG
    dag: str | None = None

    @property
    def engine(self) -> str:
        return self.db.engine

    @property
    def dag_id(self) -> str:
        return self.dag or DAG_IDS[self.engine]

    @property
    def input_folder(self) -> str:
        return INPUT_FOLDERS[self.engine]

    @property
    def table(self) -> str:
        return "public.events" if self.engine == "postgres" else f"{self.db.name}.events"

    # -- setup ------------------------------------------------------------------------------
    def create_table(self) -> None:
        ddl = WIDE.postgres_ddl if self.engine == "postgres" else WIDE.mysql_ddl
        with closing(self.db.connect()) as conn:
            cur = conn.cursor()
            cur.execute(ddl.format(table=TABLE_NAME))
            for cols in WIDE.index_columns:
                cur.execute(
                    f"CREATE INDEX events_{'_'.join(cols)}_idx ON events ({', '.join(cols)})"
                )
            if self.engine == "postgres":
                cur.execute("ALTER TABLE events SET (fillfactor = 90)")
            cur.close()

    def add_input(
        self, ds: str, *, rows: int | None = None, seed: int = 7, id_offset: int = 0
    ) -> list[Path]:
        """Generate the input of logical date ``ds`` and put it under ``<folder>/<ds>/``
        (``id_offset`` shifts its ids, for a second date loaded into the same table)."""
        s3 = self.moto.client("s3")
        for bucket in (self.input_bucket, self.staging_bucket):
            if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
                s3.create_bucket(Bucket=bucket)
        files = generate(
            WIDE,
            rows or self.rows,
            self.workdir / ds,
            files=self.files,
            seed=seed,
            id_offset=id_offset,
        )
        for path in files:
            s3.upload_file(str(path), self.input_bucket, f"{self.input_folder}/{ds}/{path.name}")
        self.dates[ds] = files
        return files

    def put_input_object(self, ds: str, name: str, body: bytes) -> None:
        self.moto.client("s3").put_object(
            Bucket=self.input_bucket, Key=f"{self.input_folder}/{ds}/{name}", Body=body
        )

    def env(self) -> dict[str, str]:
        prefix = "PG" if self.engine == "postgres" else "MYSQL"
        return os.environ | {
            "PYTHONPATH": str(REPO_ROOT),
            f"BULKLOAD_EXAMPLE_{prefix}_CONN": self.db.conn_id,
            f"BULKLOAD_EXAMPLE_{prefix}_TABLE": self.table,
            "BULKLOAD_EXAMPLE_MYSQL_METHOD": "client",
            "BULKLOAD_EXAMPLE_INPUT": f"s3://{self.input_bucket}",
            "BULKLOAD_EXAMPLE_STAGING": f"s3://{self.staging_bucket}",
            "BULKLOAD_EXAMPLE_CHUNK_SIZE": self.chunk_size,
        }

    # -- runs -------------------------------------------------------------------------------
    def run(
        self,
        ds: str,
        conf: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        **kill: str,
    ) -> RunResult:
        """``airflow dags test <dag> <ds>`` (with ``conf`` as the run's Params, as "Trigger DAG
        w/ config" gives them, and ``env`` added to its environment); ``kill`` sets
        BULKLOAD_TEST_KILL_* (see kill_points)."""
        env = self.env() | (env or {})
        env |= {f"BULKLOAD_TEST_KILL_{k.upper()}": v for k, v in kill.items()}
        extra = ["--conf", json.dumps(conf)] if conf else []
        self.runs += 1
        log_path = self.workdir / f"run-{self.runs}.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "airflow", "dags", "test", self.dag_id, ds, *extra],
                env=env,
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a kill takes the run's process group, not pytest
            )
            try:
                returncode = proc.wait(timeout=RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise AssertionError(
                    f"airflow dags test ran over {RUN_TIMEOUT} s:\n"
                    + log_path.read_text(errors="replace")[-8000:]
                ) from None
        return RunResult(returncode, log_path.read_text(errors="replace"))

    # -- the end state ----------------------------------------------------------------------
    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self.db.query(sql, params)

    def loaded_checksum(self) -> tuple[int, ...]:
        return ENGINES[self.engine].checksum(self.db, WIDE, table=TABLE_NAME)

    def expected_checksum(self) -> tuple[int, ...]:
        """The inputs' checksum: per file (every part of it is a count or a sum), added up."""
        files = [p for paths in self.dates.values() for p in paths]
        return tuple(map(sum, zip(*(duckdb_checksum(WIDE, p) for p in files), strict=True)))

    def snapshot(self) -> dict[str, Any]:
        """What a load must leave as it found it: the table's definition and server settings."""
        if self.engine == "postgres":
            table = {
                "indexes": self.query(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'events'"
                    " ORDER BY indexname"
                ),
                "constraints": self.query(
                    "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                    " WHERE conrelid = 'public.events'::regclass ORDER BY conname"
                ),
                "reloptions": self.query(
                    "SELECT reloptions FROM pg_class WHERE oid = 'public.events'::regclass"
                ),
            }
            settings = {
                name: self.query("SELECT current_setting(%s)", (name,))[0][0]
                for name in SETTINGS["postgres"]
            }
        else:
            table = {"create": self.query("SHOW CREATE TABLE events")[0][1]}
            settings = {
                name: self.query("SELECT @@GLOBAL." + name)[0][0] for name in SETTINGS["mysql"]
            }
        return {"table": table, "settings": settings}

    def manifests(self) -> list[dict[str, Any]]:
        s3 = self.moto.client("s3")
        listing = s3.list_objects_v2(Bucket=self.staging_bucket).get("Contents", [])
        keys = [o["Key"] for o in listing if o["Key"].endswith("manifest.json")]
        return [
            json.loads(s3.get_object(Bucket=self.staging_bucket, Key=k)["Body"].read())
            for k in keys
        ]

    def ledger(self) -> list[tuple[Any, ...]]:
        if self.engine == "postgres":
            return self.query(
                "SELECT chunk_key, count(*) FROM bulkload.chunk_ledger"
                " WHERE table_name = 'public.events' GROUP BY chunk_key"
            )
        return self.query(
            "SELECT chunk_key, count(*) FROM bulkload_chunk_ledger"
            " WHERE table_name = %s GROUP BY chunk_key",
            (self.table,),
        )

    def leases(self) -> list[tuple[Any, ...]]:
        """This load's bulk-mode leases, in the server-wide state (hooks/bulk_mode.py)."""
        holder = f"{self.dag_id}/{self.table}/%"
        if self.engine == "postgres":
            # the harness's admin connection is to the maintenance database, where the state is
            with closing(_pg_admin(self.db.server)) as conn:
                if conn.execute("SELECT to_regclass('bulkload.bulk_mode_leases')").fetchone()[0]:
                    return list(
                        conn.execute(
                            "SELECT token, holder FROM bulkload.bulk_mode_leases"
                            " WHERE holder LIKE %s",
                            (holder,),
                        ).fetchall()
                    )
                return []
        return self.query(
            "SELECT token, holder FROM bulkload.bulkload_bulk_mode_leases WHERE holder LIKE %s",
            (holder,),
        )

    def assert_loaded_once(self, before: dict[str, Any]) -> None:
        """Rows and checksum equal the inputs, the table and the server are as before, every
        staged chunk is in the ledger exactly once and no bulk-mode lease is left."""
        assert self.loaded_checksum() == self.expected_checksum()
        after = self.snapshot()
        assert after == before, f"before: {before}\nafter: {after}"
        ledger = self.ledger()
        assert all(count == 1 for _, count in ledger), ledger
        staged = {ChunkSpec.from_dict(c).key for m in self.manifests() for c in m["chunks"]}
        assert {key for key, _ in ledger} == staged
        assert len(staged) > 1, "the test input should span several chunks"
        assert self.leases() == []
