"""Hostile bulkload:// Asset URIs: create_asset and the sanitize_uri handler Airflow applies."""

from __future__ import annotations

import pytest
from airflow.sdk import Asset

from airflow_bulkload.assets import create_asset
from airflow_bulkload.catalog import TableRef


@pytest.mark.parametrize(
    "table",
    ['"my.schema".events', "`my.db`.events", 'public."v1.2_events"'],
    ids=["pg-quoted-schema", "mysql-backticks", "quoted-table"],
)
def test_create_asset_takes_a_table_name_with_a_quoted_dot(table: str) -> None:
    """What I did: create_asset(conn_id="pg", table='"my.schema".events'): a legal table name
    as bulk_load_table takes it (TableRef.parse reads it as 2 parts).

    What happened: InvalidIdentifierError "table name '%22my.schema%22.events' must be
    'table' or 'schema.table'": create_asset percent-encodes the quotes but keeps the dots,
    and sanitize_uri then parses the *encoded* path, where the quotes no longer group the dot.
    (Written by hand, Asset('bulkload://pg/"my.schema".events') is accepted.)

    What should happen: the asset is created; its URI names the same table.
    """
    assert TableRef.parse(table).schema  # a legal 2-part name
    asset = create_asset(conn_id="pg", table=table)
    assert asset.uri.startswith("bulkload://pg/")


@pytest.mark.parametrize(
    ("conn_id", "table", "by_hand"),
    [
        ("pg", "public.my table", "bulkload://pg/public.my table"),
        ("pg", "public.événements", "bulkload://pg/public.événements"),
        ("pg:main", "public.events", "bulkload://pg:main/public.events"),
    ],
    ids=["space", "unicode", "colon-in-conn-id"],
)
def test_one_table_has_one_asset_uri(conn_id: str, table: str, by_hand: str) -> None:
    """What I did: the producer declares outlets=[create_asset(conn_id, table)]; a consumer
    DAG schedules on the URI written by hand (both accepted by Airflow).

    What happened: create_asset gives bulkload://pg/public.my%20table, the hand-written URI
    stays bulkload://pg/public.my table (likewise %C3%A9 vs é, pg%3Amain vs pg:main): two
    different Assets for one table, so the consumer is never triggered. sanitize_uri does not
    normalise percent-encoding.

    What should happen: sanitize_uri canonicalises the encoding, so both spell one URI.
    """
    assert create_asset(conn_id=conn_id, table=table).uri == Asset(by_hand).uri


@pytest.mark.parametrize(
    "uri",
    [
        "bulkload://pg/a%2Eb%2Ec",
        "bulkload://pg/%20",
        "bulkload://pg/ ",
        "bulkload://pg/a%00b",
        "bulkload://pg/a\x00b",
    ],
    ids=["encoded-3-parts", "encoded-blank", "blank", "encoded-nul", "nul"],
)
def test_a_uri_naming_no_possible_table_is_refused_at_parse(uri: str) -> None:
    """What I did: URIs whose decoded table is "a.b.c" (3 parts), " ", or holds a NUL.

    What happened: all accepted: sanitize_uri validates the raw path text, not the table it
    names ("a%2Eb%2Ec" is one part to it; a NUL byte or a lone space passes TableRef.parse).

    What should happen: refused at parse like bulkload://pg/a.b.c is.
    """
    with pytest.raises(ValueError):
        Asset(uri)


def test_create_asset_refuses_a_template_as_conn_id() -> None:
    """What I did: conn_id is templated in every operator now, so a DAG that picks the
    connection from a Param also wrote outlets=[create_asset(conn_id="{{ params.conn }}",
    table=...)] (Asset URIs are not templated).

    What happened: accepted, as bulkload://%7B%7B%20params.conn%20%7D%7D/public.events: an
    asset naming no connection, which no consumer will ever match.

    What should happen: a ValueError saying an Asset URI cannot be templated.
    """
    with pytest.raises(ValueError):
        create_asset(conn_id="{{ params.conn }}", table="public.events")
