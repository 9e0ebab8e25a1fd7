"""What parsing a DAG that uses the pipeline imports: every task process parses its DAG file
before it runs (Airflow 3's task runner), so a heavy import there is paid by every task launch.
DuckDB, boto3/botocore and the database drivers are imported by the tasks that use them."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("duckdb", "boto3", "botocore", "psycopg", "MySQLdb")


def test_the_pipeline_and_its_operators_import_no_heavy_library() -> None:
    probe = (
        "import json, sys\n"
        "import airflow_bulkload.pipeline, airflow_bulkload.operators, airflow_bulkload.triggers\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
