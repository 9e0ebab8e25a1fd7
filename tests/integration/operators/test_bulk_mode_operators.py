"""Enter/ExitBulkModeOperator as setup/teardown, run for real with dag.test().

RDS runs against the moto server (the trigger's aiobotocore client reaches it through the
``aws_default`` endpoint) with the apply-semantics model from tests/support/rds_model.py.
"""

from __future__ import annotations

from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow_bulkload.operators import BulkModeTarget, EnterBulkModeOperator, ExitBulkModeOperator
from tests.harness import MotoServer, TestDatabase, register_dag, unique_name
from tests.integration.hooks.test_bulk_mode_server import (
    _bulk_shown,
    _show,
    _wait_shown,
    restore_globals,  # noqa: F401 (fixture)
)
from tests.integration.hooks.test_rds_bulk_mode import (
    cluster_values,
    group_status,
    make_cluster,
    make_instance,
    member_status,
    values,
)


def _task_states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_deferrable_swap_runs_its_trigger_reboots_and_resumes(
    airflow_db: Path, moto_server: MotoServer, rds_model: Any
) -> None:
    from airflow.sdk import DAG, task
    from airflow.utils.state import DagRunState

    rds = moto_server.client("rds")
    ident = unique_name("db").replace("_", "-")
    group = f"{ident}-pg"
    make_instance(rds, ident, group=group, group_values={"work_mem": "4096"})
    before = values(rds, group)
    common: dict[str, Any] = {
        "table": "public.events",
        "target": BulkModeTarget(db_instance_identifier=ident),
        "strategy": "swap",
        "reboot_policy": "allowed",
        "deferrable": True,
        "waiter_delay": 0,
        "waiter_max_attempts": 20,
    }
    seen: dict[str, Any] = {}

    with DAG(
        dag_id="bulkload_test_bulk_mode_rds", schedule=None, start_date=datetime(2025, 1, 1)
    ) as dag:
        enter = EnterBulkModeOperator(task_id="enter_bulk_mode", **common)
        exit_ = ExitBulkModeOperator(task_id="exit_bulk_mode", **common)

        @task
        def load() -> None:
            seen["status"] = group_status(rds, ident)
            seen["max_wal_size"] = values(rds, f"bulkload-{ident}")["max_wal_size"]

        enter.as_setup() >> load() >> exit_.as_teardown(setups=enter)

    register_dag(dag)
    run = dag.test(run_after=datetime(2025, 1, 2))

    assert run.state == DagRunState.SUCCESS, _task_states(run)
    assert seen == {"status": (f"bulkload-{ident}", "in-sync"), "max_wal_size": ("4096", "user")}
    assert group_status(rds, ident) == (group, "in-sync")
    assert values(rds, group) == before
    assert not rds.describe_db_parameter_groups(DBParameterGroupName=f"bulkload-{ident}")[
        "DBParameterGroups"
    ]


def test_teardown_restores_a_server_when_the_load_fails(
    airflow_db: Path,
    restore_globals: TestDatabase,  # noqa: F811
) -> None:
    from airflow.sdk import DAG, task
    from airflow.utils.state import DagRunState

    db = restore_globals
    names = list(_bulk_shown(db))
    before = {n: _show(db, n) for n in names}
    seen: dict[str, Any] = {}

    with DAG(
        dag_id=f"bulkload_test_bulk_mode_{db.engine}",
        schedule=None,
        start_date=datetime(2025, 1, 1),
    ) as dag:
        enter = EnterBulkModeOperator(
            task_id="enter_bulk_mode", table="events", target=BulkModeTarget(conn_id=db.conn_id)
        )
        exit_ = ExitBulkModeOperator(
            task_id="exit_bulk_mode", table="events", target=BulkModeTarget(conn_id=db.conn_id)
        )

        @task
        def load() -> None:
            seen.update(_wait_shown(db, _bulk_shown(db)))
            raise RuntimeError("the load failed")

        enter.as_setup() >> load() >> exit_.as_teardown(setups=enter)

    register_dag(dag)
    run = dag.test(run_after=datetime(2025, 1, 2))

    states = _task_states(run)
    assert run.state == DagRunState.FAILED
    assert states["load"] == "failed" and states["exit_bulk_mode"] == "success", states
    assert seen == _bulk_shown(db)
    assert _wait_shown(db, before) == before


def test_a_chunk_load_renews_its_runs_lease(restore_globals: TestDatabase) -> None:  # noqa: F811
    """The pipeline's load tasks renew the run's lease as they start (RenewBulkModeLease)."""
    from types import SimpleNamespace

    from airflow_bulkload.bulk_mode.policy import LeaseKey
    from airflow_bulkload.hooks.bulk_mode import BulkModeHook
    from airflow_bulkload.operators.bulk_mode import RenewBulkModeLease

    db = restore_globals
    context: Any = {"dag": SimpleNamespace(dag_id="nightly"), "logical_date": None, "run_id": "r1"}
    hook = BulkModeHook(BulkModeTarget(conn_id=db.conn_id))
    key = LeaseKey.of("nightly", "public.events", "r1")
    renew = RenewBulkModeLease(table="public.events", target=BulkModeTarget(conn_id=db.conn_id))

    renew(context)  # holds no lease yet: logged, not raised
    hook.enter(key, ttl=60)
    backend = hook.server
    with closing(backend.connect()) as conn:
        expires_before = {t: e for t, _, e in backend.sql.bulk_mode_leases(conn)}[key.token]
    renew(context)
    with closing(backend.connect()) as conn:
        expires_after = {t: e for t, _, e in backend.sql.bulk_mode_leases(conn)}[key.token]
    hook.exit(key)

    assert expires_after > expires_before + 3000  # the default TTL (hours), not the 60 s given


def test_deferrable_cluster_bulk_mode_waits_for_every_member_and_restores(
    airflow_db: Path, moto_server: MotoServer, rds_model: Any
) -> None:
    from airflow.sdk import DAG, task
    from airflow.utils.state import DagRunState

    rds = moto_server.client("rds")
    cluster = unique_name("cl").replace("_", "-")
    writer, reader = f"{cluster}-w", f"{cluster}-r"
    group = f"{cluster}-cpg"
    make_cluster(rds, cluster, group=group, members=(writer, reader))
    before_cluster, before_writer = cluster_values(rds, group), values(rds, f"{writer}-pg")
    common: dict[str, Any] = {
        "table": "public.events",
        "target": BulkModeTarget(db_instance_identifier=writer, db_cluster_identifier=cluster),
        "settings": {"autovacuum_naptime": "60"},
        "deferrable": True,
        "waiter_delay": 0,
        "waiter_max_attempts": 20,
    }
    seen: dict[str, Any] = {}

    with DAG(
        dag_id="bulkload_test_bulk_mode_aurora_cluster",
        schedule=None,
        start_date=datetime(2025, 1, 1),
    ) as dag:
        enter = EnterBulkModeOperator(task_id="enter_bulk_mode", **common)
        exit_ = ExitBulkModeOperator(task_id="exit_bulk_mode", **common)

        @task
        def load() -> None:
            seen["members"] = member_status(rds, cluster)
            seen["naptime"] = cluster_values(rds, group)["autovacuum_naptime"]
            seen["mwm"] = values(rds, f"{writer}-pg")["maintenance_work_mem"]

        enter.as_setup() >> load() >> exit_.as_teardown(setups=enter)

    register_dag(dag)
    run = dag.test(run_after=datetime(2025, 1, 2))

    assert run.state == DagRunState.SUCCESS, _task_states(run)
    assert seen == {
        "members": {writer: "in-sync", reader: "in-sync"},
        "naptime": ("60", "user"),
        "mwm": ("1048576", "user"),
    }
    assert cluster_values(rds, group) == before_cluster
    assert values(rds, f"{writer}-pg") == before_writer


def test_a_target_templated_from_params_is_rendered_at_run_time(
    airflow_db: Path, moto_server: MotoServer, rds_model: Any
) -> None:
    """A UI Param names the instance: the operators render the target before they validate."""
    from airflow.sdk import DAG, task
    from airflow.utils.state import DagRunState

    rds = moto_server.client("rds")
    ident = unique_name("db").replace("_", "-")
    group = f"{ident}-pg"
    make_instance(rds, ident, group=group)
    before = values(rds, group)
    target = BulkModeTarget(db_instance_identifier="{{ params.instance }}")
    common: dict[str, Any] = {
        "table": "public.events",
        "target": target,
        "reboot_policy": "{{ params.reboot_policy }}",
        "waiter_delay": 0,
        "waiter_max_attempts": 20,
    }
    seen: dict[str, Any] = {}

    with DAG(
        dag_id="bulkload_test_bulk_mode_templated_target",
        schedule=None,
        start_date=datetime(2025, 1, 1),
        params={"instance": ident, "reboot_policy": "never"},
    ) as dag:
        enter = EnterBulkModeOperator(task_id="enter_bulk_mode", **common)
        exit_ = ExitBulkModeOperator(task_id="exit_bulk_mode", **common)

        @task
        def load() -> None:
            seen["mwm"] = values(rds, group)["maintenance_work_mem"]

        enter.as_setup() >> load() >> exit_.as_teardown(setups=enter)

    register_dag(dag)
    run = dag.test(run_after=datetime(2025, 1, 2))

    assert run.state == DagRunState.SUCCESS, _task_states(run)
    assert seen == {"mwm": ("1048576", "user")}
    assert values(rds, group) == before
    assert target.db_instance_identifier == "{{ params.instance }}"  # rendered into a copy
