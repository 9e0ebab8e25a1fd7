"""Import what the load tasks need once, in the long-lived worker process, not in every task.

Add one line to the deployment's ``$AIRFLOW_HOME/config/airflow_local_settings.py``::

    import airflow_bulkload.preload  # noqa: F401

Why: the LocalExecutor and Celery workers run each task in a process forked from a long-lived
worker process, and a forked process starts with the modules its parent had imported. Without this
line every task process imports boto3, the amazon / postgres / mysql providers' hooks, psycopg and
this package again on its own: 0.4-0.8 s per task on a 2-core machine, on the critical path of every
step of the pipeline (measured in docs/performance.md). Airflow imports ``airflow_local_settings``
in every process it starts (scheduler, workers, dag-processor, api-server) before the executor
forks its workers, so the imports here are paid once per deployment start.

Only modules are imported: no client, session, connection or thread is created, so nothing is
shared across the fork. The KubernetesExecutor starts every task in a fresh interpreter and gains
nothing from this (nor loses anything).
"""

from __future__ import annotations

import importlib
from contextlib import suppress

#: what the pipeline's tasks import, in import order; every one is a dependency of this package
REQUIRED_MODULES: tuple[str, ...] = (
    "boto3",
    "botocore.exceptions",
    "psycopg",
    "airflow.providers.amazon.aws.hooks.s3",
    "airflow.providers.amazon.aws.hooks.rds",
    "airflow.providers.postgres.hooks.postgres",
    "airflow_bulkload.pipeline",
    "airflow_bulkload.operators",
    "airflow_bulkload.dialects.postgres",
    "airflow_bulkload.s3io",
    "airflow_bulkload.compression",
    "airflow_bulkload.staging.manifest",
    "airflow_bulkload.staging.normalize",
    "airflow_bulkload.lineage",
)

#: imported when installed: the MySQL client library (a system library may be missing where only
#: PostgreSQL is loaded), DuckDB (staging), and the OpenLineage provider (an extra)
OPTIONAL_MODULES: tuple[str, ...] = (
    "MySQLdb",
    "airflow.providers.mysql.hooks.mysql",
    "airflow_bulkload.dialects.mysql",
    "duckdb",
    "airflow.providers.openlineage.extractors",
    "airflow.providers.common.compat.openlineage.facet",
)


def preload() -> list[str]:
    """Import the modules the pipeline's tasks need.

    :data:`REQUIRED_MODULES` always, :data:`OPTIONAL_MODULES` when installed; returns the names
    of the modules imported.
    """
    loaded = []
    for name in REQUIRED_MODULES:
        importlib.import_module(name)
        loaded.append(name)
    for name in OPTIONAL_MODULES:
        with suppress(ImportError):
            importlib.import_module(name)
            loaded.append(name)
    return loaded


preload()
