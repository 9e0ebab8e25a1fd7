"""A staging attempt killed with kill -9 leaves its files; the next staging on the worker removes
them, and never a live sibling's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import Resources, StagingOptions, stage
from airflow_bulkload.staging.workdir import WORK_ROOT_NAME
from tests.harness import REPO_ROOT, MotoServer

HOLD_A_WORKDIR = """
import sys, time
from pathlib import Path
from airflow_bulkload.staging.workdir import staging_workdir
with staging_workdir(Path(sys.argv[1]), sys.argv[2]) as work:
    (work / "normalized.csv").write_bytes(b"x" * 1_000_000)
    print(work, flush=True)
    time.sleep(600)
"""


def hold_workdir(temp_root: Path, owner: str) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_WORKDIR, str(temp_root), owner],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=os.environ | {"PYTHONPATH": str(REPO_ROOT)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line, "the child did not make its work directory"
    return proc, Path(line)


def test_a_killed_attempts_files_are_removed_by_the_next_staging(
    moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    temp_root = tmp_path / "worker-tmp"
    killed, killed_dir = hold_workdir(temp_root, "dag/stage/run-1/-1")
    alive, alive_dir = hold_workdir(temp_root, "dag/stage/run-2/-1")
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=30)
        assert (killed_dir / "normalized.csv").exists()  # kill -9: nothing cleaned up
        source = tmp_path / "in.csv"
        source.write_text("".join(f"{i},x\n" for i in range(100)))

        stage(
            str(source),
            s3=moto_server.client("s3"),
            staging_uri=f"s3://{s3_bucket}/staging",
            dag_id="dag",
            table="t",
            run="run-3",
            options=StagingOptions(file_format=FileFormat(), columns=["id", "v"]),
            resources=Resources(temp_dir=str(temp_root), check_temp_space=False),
        )

        assert not killed_dir.exists()
        assert (alive_dir / "normalized.csv").exists()  # a live sibling is left alone
        assert sorted(p.name for p in (temp_root / WORK_ROOT_NAME).iterdir()) == [alive_dir.name]
    finally:
        alive.kill()
        alive.wait(timeout=30)
