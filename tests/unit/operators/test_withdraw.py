from __future__ import annotations

import pytest

from airflow_bulkload.operators.withdraw import parse_flag


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("True", True),
        ("false", False),
        (" 1 ", True),
        ("None", False),
        ("", False),
    ],
)
def test_reload_flag_reads_rendered_params(value: object, expected: bool) -> None:
    assert parse_flag(value, "reload") is expected


@pytest.mark.parametrize("value", ["maybe", "'; DROP TABLE t; --", "{{ params.reload }}"])
def test_reload_flag_refuses_anything_else(value: str) -> None:
    with pytest.raises(ValueError, match="reload must be true or false"):
        parse_flag(value, "reload")


def test_the_pipeline_wires_reload_and_the_reports_table_check() -> None:
    import pendulum
    from airflow.sdk import DAG

    from airflow_bulkload.pipeline import bulk_load_table

    with DAG("wiring", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        bulk_load_table(
            table="public.t",
            conn_id="pg",
            source="s3://in/x/",
            staging="s3://stage/x",
            reload="{{ params.reload }}",
        )
    withdraw = dag.get_task("load_public_t.withdraw_superseded")
    report = dag.get_task("load_public_t.report")
    assert withdraw.reload == "{{ params.reload }}"  # type: ignore[attr-defined]
    assert "reload" in withdraw.template_fields
    assert report.conn_id == "pg"  # type: ignore[attr-defined]
    assert report.manifest is not None  # type: ignore[attr-defined]
