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


def aws_client(service_name: str, aws_conn_id: str | None, region_name: str | None = None) -> Any:
    """A boto3 client for the AWS connection, made as the amazon provider's hooks make it.

    The hook's session (credentials, assumed role, profile), region (``region_name`` wins over
    the connection's, as with the hooks), endpoint URL, botocore config and ``verify``, all from
    the connection, but not the hooks' user-agent tag: to name its caller it walks
    ``inspect.stack()``, which looks up the file of every loaded module (about 2,600 in a task
    process) and took 0.2 s of every task that made a client, several of them one after another
    on the way to the first loaded row.
    """
    from copy import deepcopy

    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    hook = AwsBaseHook(aws_conn_id=aws_conn_id, client_type=service_name, region_name=region_name)
    session: Any = hook.get_session(region_name=hook.region_name)
    return session.client(
        service_name,
        endpoint_url=hook.conn_config.get_service_endpoint_url(service_name=service_name),
        config=deepcopy(hook.config),
        verify=hook.verify,
    )
