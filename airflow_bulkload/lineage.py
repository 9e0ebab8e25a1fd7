"""OpenLineage for the load tasks: the S3 objects read and the table written.

The datasets follow OpenLineage's naming: an S3 object is namespace ``s3://<bucket>``, name
``<key>`` (a local input file ``file``, its path); a table is the namespace the postgres / mysql providers' hooks give their connection
(``postgres://host:port``, ``mysql://host:port``) and name ``database.schema.table`` on PostgreSQL,
``database.table`` on MySQL, the same names common-sql's operators emit, so a lineage graph joins
our loads with the SQL tasks that read the table afterwards.

Only the OpenLineage listener calls this (``get_openlineage_facets_on_complete``), and only where
``apache-airflow-providers-openlineage`` is installed (the ``openlineage`` extra): its imports stay
inside the functions so the operators import without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from airflow_bulkload.catalog import TableInfo
from airflow_bulkload.s3io import parse_s3_uri

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_bulkload.hooks.bulk_load import BulkLoadHook

#: more input objects than this are named by their common prefix instead (an event stays small)
MAX_INPUT_DATASETS = 100


def input_dataset_names(locations: Iterable[str]) -> list[tuple[str, str]]:
    """(namespace, name) of each input object or file, in order, without repeats.

    S3 objects are ``s3://<bucket>`` / ``<key>``; local files (staging reads those too) are
    ``file`` / ``<path>``. Past :data:`MAX_INPUT_DATASETS` inputs, one (namespace, name) per
    bucket: its objects' common folder (OpenLineage's convention for a directory of files), or
    the object itself when it is the bucket's only one.
    """
    seen: dict[tuple[str, str], None] = {}
    for location in locations:
        if location.startswith("s3://"):
            bucket, key = parse_s3_uri(location)
            seen[(f"s3://{bucket}", key or "/")] = None
        else:
            seen[("file", location)] = None
    names = list(seen)
    if len(names) <= MAX_INPUT_DATASETS:
        return names
    by_namespace: dict[str, list[str]] = {}
    for namespace, key in names:
        by_namespace.setdefault(namespace, []).append(key)
    return [(ns, _common_folder(keys)) for ns, keys in by_namespace.items()]


def _common_folder(keys: list[str]) -> str:
    if len(keys) == 1:
        return keys[0]
    first, last = min(keys), max(keys)
    length = 0
    while length < min(len(first), len(last)) and first[length] == last[length]:
        length += 1
    prefix = first[:length]
    # a directory, not half a file name
    return prefix[: prefix.rfind("/") + 1] or "/"


def table_dataset_name(database: str | None, table: TableInfo) -> str:
    """The table's OpenLineage name: ``database.schema.table``, or ``database.table`` on MySQL.

    MySQL's schema is the database, and its provider's hook gives no database of its own.
    """
    return ".".join(part for part in (database, table.table.schema, table.table.name) if part)


def load_lineage(
    hook: BulkLoadHook, table: str, input_uris: Iterable[str], *, rows: int, nbytes: int
) -> OperatorLineage:
    """The lineage of a load into ``table``.

    In: the input objects. Out: the table with its schema and the rows and bytes this load put
    there (what the task's result counted in the table).
    """
    from airflow.providers.common.compat.openlineage.facet import (
        Dataset,
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
        SchemaDatasetFacet,
        SchemaDatasetFacetFields,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage

    connection = hook.get_connection(hook.conn_id)
    info = _database_info(connection)
    described = hook.describe_table(table)
    schema: Any = SchemaDatasetFacet(
        fields=[SchemaDatasetFacetFields(name=c.name, type=c.data_type) for c in described.columns]
    )
    output = OutputDataset(
        namespace=f"{info.scheme}://{info.authority}",
        name=table_dataset_name(info.database, described),
        facets={"schema": schema},
        outputFacets={
            "outputStatistics": OutputStatisticsOutputDatasetFacet(rowCount=rows, size=nbytes)
        },
    )
    inputs = [Dataset(namespace=ns, name=name) for ns, name in input_dataset_names(input_uris)]
    return OperatorLineage(inputs=inputs, outputs=[output])


def _database_info(connection: Any) -> Any:
    """Scheme, authority and database as the connection's own provider hook names them."""
    return connection.get_hook().get_openlineage_database_info(connection)
