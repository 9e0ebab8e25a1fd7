"""Import what the load tasks need once, in the long-lived worker process, not in every task.

Add one line to the deployment's ``$AIRFLOW_HOME/config/airflow_local_settings.py``::

    import airflow_bulkload.preload  # noqa: F401

Why: the LocalExecutor and Celery workers run each task in a process forked from a long-lived
worker process, and a forked process starts with the modules its parent had imported. Without this
line every task process imports boto3, the amazon / postgres / mysql providers' hooks, psycopg and
this package again on its own: 0.4-0.8 s per task on a 2-core machine, on the critical path of every
step of the pipeline (measured in docs/performance.md). Airflow imports ``airflow_local_settings``
in every process it starts before the executor forks its workers, so a worker pays the imports
once, when it starts. So does every other Airflow process that sees the line (api-server,
triggerer, CLI calls): about 1.5 s and 60 MB more at start, for nothing where no task is forked.

Only modules are imported: no client, session, connection or thread is created, so nothing is
shared across the fork, and a module that fails to import is logged, never raised: Airflow's
processes start whatever happens here. The KubernetesExecutor starts every task in a fresh
interpreter and gains nothing from this: leave the line out of its pods, where it would only add
the imports a task does not need (about a second per process start).
"""

from __future__ import annotations

import importlib
import logging
import sys

log = logging.getLogger(__name__)

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
    "airflow_bulkload.advice.instance",
    "airflow_bulkload.assets",
    "airflow_bulkload.lineage",
    "duckdb",
)

#: imported when installed: the MySQL client library (its system library may be missing where
#: only PostgreSQL is loaded) and the OpenLineage provider (an extra)
OPTIONAL_MODULES: tuple[str, ...] = (
    "MySQLdb",
    "airflow.providers.mysql.hooks.mysql",
    "airflow_bulkload.dialects.mysql",
    "airflow.providers.openlineage.extractors",
    "airflow.providers.common.compat.openlineage.facet",
)


def _provider_import_in_progress() -> bool:
    """Whether a module of this package is half imported.

    Airflow runs its local settings inside the process's first ``import airflow``; when that
    import comes from this package (a script or a test that imports an operator first),
    importing the package again here would meet its half-initialised modules. Such a process is
    no forking worker: it needs no preload.
    """
    return any(
        (name == "airflow_bulkload" or name.startswith("airflow_bulkload."))
        and name != __name__
        # CPython's flag for a module mid-import; were it gone, the guard would be off and the
        # circular import would be logged by preload(), not raised
        and getattr(getattr(module, "__spec__", None), "_initializing", False)
        for name, module in list(sys.modules.items())
    )


def preload() -> list[str]:
    """Import the modules the pipeline's tasks need; return the names of those imported.

    Never raises: it runs inside every Airflow process's start, and a module that fails here
    must not stop the scheduler or the api-server. A required module that fails is logged (the
    task that needs it then fails on its own import, with the same error); an optional one that
    is not installed is skipped.
    """
    if _provider_import_in_progress():
        return []
    loaded = []
    for name in (*REQUIRED_MODULES, *OPTIONAL_MODULES):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            if name in REQUIRED_MODULES:
                log.warning("airflow_bulkload.preload: %s was not imported: %s", name, exc)
        except Exception:  # a broken install: the tasks that import it will say so
            log.warning("airflow_bulkload.preload: importing %s failed", name, exc_info=True)
        else:
            loaded.append(name)
    return loaded


preload()
