"""The ``bulkload://`` Asset URI scheme: a table as loaded through one Airflow connection.

``bulkload://<conn_id>/<table>`` names the target table of a load (``table`` as given to
``bulk_load_table``: ``schema.table`` or ``db.table``), so a downstream DAG can be scheduled on
it without the DAG file knowing the database host. Registered with Airflow through the provider's
``asset-uris``: Airflow checks and normalises every ``bulkload://`` URI with :func:`sanitize_uri`
when the DAG is parsed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from airflow_bulkload.catalog import TableRef

if TYPE_CHECKING:
    from urllib.parse import SplitResult

SCHEME = "bulkload"
#: left unencoded in the table part: a qualified name's dot and the quotes that group a dot
_TABLE_SAFE = '."`'


def _canonical(text: str, safe: str) -> str:
    """One spelling of a URI part, however it was percent-encoded (or not)."""
    return quote(unquote(text), safe=safe)


def _check_table(table: str, uri: str) -> None:
    if not table.strip() or any(ord(c) < 32 for c in table):
        raise ValueError(f"bulkload:// URI names no table: {uri!r}")
    parts = TableRef.parse(table)  # ValueError naming what is wrong with it
    if any(not part.strip() for part in (parts.schema, parts.name) if part is not None):
        raise ValueError(f"bulkload:// URI names a blank schema or table: {uri!r}")


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Refuse a ``bulkload://`` URI that names no connection or no one table; spell it one way.

    The connection and the table are percent-encoded one way (a table written by hand with a
    space or an accent, and :func:`create_asset`'s, are the same Asset) and checked decoded.
    """
    if not uri.netloc:
        raise ValueError("a bulkload:// URI names a connection: bulkload://<conn_id>/<table>")
    table = unquote(uri.path.strip("/"))
    if not table or "/" in uri.path.strip("/"):
        raise ValueError(
            f"a bulkload:// URI names one table after the connection: bulkload://{uri.netloc}/"
            f"<schema.table>, got path {uri.path!r}"
        )
    _check_table(table, uri.geturl())
    return uri._replace(
        netloc=_canonical(uri.netloc, safe=":"),
        path="/" + _canonical(table, safe=_TABLE_SAFE),
        query="",
        fragment="",
    )


def create_asset(*, conn_id: str, table: str, extra: dict[str, Any] | None = None) -> Any:
    """The Asset of ``table`` as loaded through ``conn_id``: ``bulkload://<conn_id>/<table>``.

    Literal values only: an Asset's URI is fixed when the DAG is parsed, not rendered per run.
    """
    from airflow.sdk import Asset

    for name, value in (("conn_id", conn_id), ("table", table)):
        if "{{" in value or "{%" in value:
            raise ValueError(
                f"create_asset({name}={value!r}): an Asset URI is not templated; name the "
                "connection and the table the DAG loads"
            )
    netloc = quote(conn_id, safe=":")
    return Asset(uri=f"{SCHEME}://{netloc}/{quote(table, safe=_TABLE_SAFE)}", extra=extra)
