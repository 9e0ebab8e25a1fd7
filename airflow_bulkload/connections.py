"""Driver connections from Airflow connections, keeping this provider's own extras out of them."""

from __future__ import annotations

from typing import Any

#: connection extras this provider reads itself (``bulkload_state_schema``,
#: ``bulkload_bulk_mode_database``, ...): never handed to the driver
OWN_EXTRA_PREFIX = "bulkload_"


def postgres_hook(conn_id: str, **kwargs: Any) -> Any:
    """A ``PostgresHook`` that passes every extra of the connection to libpq as before, except ours.

    libpq refuses unknown options (``invalid connection option``).
    """
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    hook = PostgresHook(postgres_conn_id=conn_id, **kwargs)
    own = {key for key in hook.connection.extra_dejson if key.startswith(OWN_EXTRA_PREFIX)}
    if own:
        hook.ignored_extra_options = set(hook.ignored_extra_options) | own
    return hook
