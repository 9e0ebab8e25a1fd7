"""`make demo`: the example pipeline end to end on embedded defaults.

Until the pipeline lands (see the issue tracker), this says what the demo will do.
"""

from __future__ import annotations

PLAN = """\
make demo will:
  1. create a throwaway AIRFLOW_HOME (SQLite) and start a moto S3 server on 127.0.0.1;
  2. generate a realistic input (2 M rows, shuffled, a few CSV files) and upload it;
  3. run the example PostgreSQL DAG end to end with `airflow dags test` against the local server;
  4. print rows loaded, time per stage, rows/s, and that indexes, autovacuum and settings are restored.
The pipeline is not built yet: nothing was run."""

if __name__ == "__main__":
    print(PLAN)
