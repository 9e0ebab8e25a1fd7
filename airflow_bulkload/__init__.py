"""Fast, restartable bulk loading from Amazon S3 into PostgreSQL and MySQL for Apache Airflow."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def get_provider_info() -> dict[str, Any]:
    """Describe this package to Airflow's provider manager (entry point ``apache_airflow_provider``)."""
    return {
        "package-name": "airflow-bulkload",
        "name": "Bulk Load",
        "description": "Bulk loading of flat files from Amazon S3 into RDS/Aurora PostgreSQL and MySQL.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Bulk Load",
                # the external system the integration serves, as the official providers fill it
                "external-doc-url": "https://aws.amazon.com/rds/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Bulk Load",
                "python-modules": [
                    "airflow_bulkload.operators.load_chunk",
                    "airflow_bulkload.operators.bulk_mode",
                    "airflow_bulkload.operators.preflight",
                    "airflow_bulkload.operators.stage",
                    "airflow_bulkload.operators.stage_groups",
                    "airflow_bulkload.operators.table",
                    "airflow_bulkload.operators.report",
                    "airflow_bulkload.operators.withdraw",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Bulk Load",
                "python-modules": ["airflow_bulkload.operators.wait_input"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Bulk Load",
                "python-modules": [
                    "airflow_bulkload.hooks.bulk_load",
                    "airflow_bulkload.hooks.bulk_mode",
                    "airflow_bulkload.hooks.table_state",
                    "airflow_bulkload.hooks.load_modes",
                ],
            }
        ],
        "asset-uris": [
            {
                "schemes": ["bulkload"],
                "handler": "airflow_bulkload.assets.sanitize_uri",
                "factory": "airflow_bulkload.assets.create_asset",
            }
        ],
        "triggers": [
            {
                "integration-name": "Bulk Load",
                "python-modules": [
                    "airflow_bulkload.triggers.bulk_mode",
                    "airflow_bulkload.triggers.db_waits",
                ],
            }
        ],
    }
