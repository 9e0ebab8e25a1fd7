"""Bulk-mode operators: assign in __init__, validate once rendered; the target renders nested."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from airflow_bulkload.operators import (
    BulkModeTarget,
    EnterBulkModeOperator,
    ExitBulkModeOperator,
)

TEMPLATED = BulkModeTarget(
    db_instance_identifier="{{ params.instance }}",
    db_cluster_identifier="{{ params.cluster }}",
    aws_conn_id="aws_{{ params.env }}",
    region_name="{{ params.region }}",
)
PARAMS = {"instance": "prod-pg", "cluster": "prod-aurora", "env": "prod", "region": "eu-west-1"}


def test_init_only_assigns_bad_values_fail_in_validate() -> None:
    op = EnterBulkModeOperator(
        task_id="enter", table="t", target=BulkModeTarget(), strategy="bogus", reboot_policy="?"
    )
    with pytest.raises(ValueError, match="give db_instance_identifier"):
        op.validate()
    op.target = BulkModeTarget(conn_id="pg")
    with pytest.raises(ValueError, match="strategy"):
        op.validate()
    op.strategy = "swap"
    with pytest.raises(ValueError, match="reboot_policy"):
        op.validate()
    op.reboot_policy = "allowed"
    op.validate()


def test_the_operators_execute_validates_first() -> None:
    op = ExitBulkModeOperator(task_id="exit", table="t", target=BulkModeTarget())
    with pytest.raises(ValueError, match="give db_instance_identifier"):
        op.execute({})  # type: ignore[arg-type]


@pytest.mark.parametrize("operator", [EnterBulkModeOperator, ExitBulkModeOperator])
def test_the_target_is_rendered_into_a_new_value(operator: Any) -> None:
    from airflow.sdk import DAG

    with DAG("render", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
        op = operator(
            task_id="bulk", table="{{ params.env }}.events", target=TEMPLATED, strategy="auto"
        )
    assert "target" in op.template_fields
    task = op.prepare_for_execution()
    task.render_template_fields({"params": PARAMS})
    assert task.table == "prod.events"
    assert task.target == BulkModeTarget(
        db_instance_identifier="prod-pg",
        db_cluster_identifier="prod-aurora",
        aws_conn_id="aws_prod",
        region_name="eu-west-1",
    )
    assert task.hook().rds.target == task.target
    task.validate()
    # the DAG's value is untouched: the next run renders it afresh
    assert op.target is TEMPLATED and TEMPLATED.db_instance_identifier == "{{ params.instance }}"


def test_unset_fields_stay_unset_when_rendered() -> None:
    target = BulkModeTarget(conn_id="{{ params.conn }}", aws_conn_id=None)
    rendered = target.render(lambda value: value.replace("{{ params.conn }}", "pg"))
    assert rendered == BulkModeTarget(conn_id="pg", aws_conn_id=None)
    assert rendered.describe() == "pg" and not rendered.is_rds


def test_the_load_tasks_lease_renewal_renders_what_the_enter_task_rendered() -> None:
    """A templated table or target names the same lease in the renewal as at enter."""
    from airflow.sdk import DAG

    from airflow_bulkload.operators import LoadChunkOperator
    from airflow_bulkload.operators.bulk_mode import RenewBulkModeLease, lease_key_of

    with DAG("renew", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS) as dag:
        load = LoadChunkOperator(task_id="load", table="t", conn_id="c", chunk={})
    context: Any = {"params": PARAMS, "task": load, "dag": dag, "run_id": "manual__1"}
    renew = RenewBulkModeLease(table="{{ params.env }}.events", target=TEMPLATED)
    key, target = renew.rendered(context)
    assert key == lease_key_of(context, "prod.events")
    assert target.db_instance_identifier == "prod-pg" and target.aws_conn_id == "aws_prod"
