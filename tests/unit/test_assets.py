"""The bulkload:// Asset URI scheme, as Airflow applies it to the Assets a DAG declares."""

from __future__ import annotations

import pytest
from airflow.sdk import Asset

import airflow_bulkload
from airflow_bulkload.assets import create_asset


def test_the_scheme_is_registered_with_its_handler_and_factory() -> None:
    [entry] = airflow_bulkload.get_provider_info()["asset-uris"]
    assert entry == {
        "schemes": ["bulkload"],
        "handler": "airflow_bulkload.assets.sanitize_uri",
        "factory": "airflow_bulkload.assets.create_asset",
    }


def test_a_table_asset_names_the_connection_and_the_table() -> None:
    asset = create_asset(conn_id="bulkload_postgres", table="public.events")
    assert asset.uri == "bulkload://bulkload_postgres/public.events"
    # Airflow normalises what a DAG author writes by hand through the same handler
    assert Asset("bulkload://bulkload_postgres/public.events/").uri == asset.uri


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("bulkload:///public.events", "names a connection"),
        ("bulkload://pg/", "names one table"),
        ("bulkload://pg/public/events", "names one table"),
        ("bulkload://pg/a.b.c", "'table' or 'schema.table'"),
    ],
)
def test_a_uri_without_a_connection_or_one_table_is_refused_at_parse(uri: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Asset(uri)
