"""The ``bulkload://`` Asset URI scheme: a table as loaded through one Airflow connection.

``bulkload://<conn_id>/<table>`` names the target table of a load (``table`` as given to
``bulk_load_table``: ``schema.table`` or ``db.table``), so a downstream DAG can be scheduled on
it without the DAG file knowing the database host. Registered with Airflow through the provider's
``asset-uris``: Airflow checks and normalises every ``bulkload://`` URI with :func:`sanitize_uri`
when the DAG is parsed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow_bulkload.catalog import TableRef

if TYPE_CHECKING:
    from urllib.parse import SplitResult

SCHEME = "bulkload"


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Refuse a ``bulkload://`` URI without a connection id or a table name; drop a trailing /."""
    if not uri.netloc:
        raise ValueError("a bulkload:// URI names a connection: bulkload://<conn_id>/<table>")
    table = uri.path.strip("/")
    if not table or "/" in table:
        raise ValueError(
            f"a bulkload:// URI names one table after the connection: bulkload://{uri.netloc}/"
            f"<schema.table>, got path {uri.path!r}"
        )
    TableRef.parse(table)  # ValueError naming what is wrong with it
    return uri._replace(path=f"/{table}", query="", fragment="")


def create_asset(*, conn_id: str, table: str, extra: dict[str, Any] | None = None) -> Any:
    """The Asset of ``table`` as loaded through ``conn_id``: ``bulkload://<conn_id>/<table>``."""
    from airflow.sdk import Asset

    return Asset(uri=f"{SCHEME}://{quote(conn_id, safe='')}/{quote(table, safe='.')}", extra=extra)
