"""Which dialect an Airflow connection type gets."""

from __future__ import annotations

import pytest

from airflow_bulkload.dialects import dialect_for


@pytest.mark.parametrize(
    ("conn_type", "engine"),
    [
        ("postgres", "postgres"),
        ("Postgres", "postgres"),
        ("postgresql", "postgres"),
        ("aurora-postgresql", "postgres"),
        # Airflow spells a URI's or JSON connection's aurora-postgresql with an underscore
        ("aurora_postgresql", "postgres"),
        ("mysql", "mysql"),
        ("mariadb", "mysql"),
        ("aurora-mysql", "mysql"),
        ("aurora_mysql", "mysql"),
    ],
)
def test_connection_types_and_their_spellings(conn_type: str, engine: str) -> None:
    assert dialect_for(conn_type).name == engine


@pytest.mark.parametrize("conn_type", ["sqlite", "", "google_cloud_sql_postgres", "post_gres"])
def test_other_connection_types_are_refused(conn_type: str) -> None:
    with pytest.raises(ValueError, match="no bulk-load dialect"):
        dialect_for(conn_type)
