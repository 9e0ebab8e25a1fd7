"""State tables made by the previous release get the ledger's new columns on first use."""

from __future__ import annotations

from contextlib import closing

from airflow_bulkload.hooks import BulkLoadHook
from tests.harness import MotoServer, TestDatabase, put_chunk

OLD_MYSQL_LEDGER = """
CREATE TABLE bulkload_chunk_ledger (
    chunk_id BINARY(32) NOT NULL,
    checksum VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    table_name VARCHAR(160) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    chunk_key VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    row_count BIGINT NOT NULL,
    byte_count BIGINT NOT NULL,
    load_id VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    loaded_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (chunk_id, checksum)
) ENGINE=InnoDB
"""


def test_an_old_mysql_ledger_gains_the_new_columns_and_keeps_its_rows(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    mysql_db.query(OLD_MYSQL_LEDGER)
    mysql_db.query(
        "INSERT INTO bulkload_chunk_ledger (chunk_id, checksum, table_name, chunk_key,"
        " row_count, byte_count, load_id) VALUES (REPEAT('x', 32), 'c', 't', 'k', 1, 1, 'old')"
    )
    mysql_db.query("CREATE TABLE notes (id int PRIMARY KEY, note VARCHAR(20))")
    chunk = put_chunk(moto_server, s3_bucket, "c0.csv.gz", b"1,a\n2,b\n", rows=2)

    assert BulkLoadHook(conn_id=mysql_db.conn_id).load_chunk("notes", chunk).rows == 2

    columns = {
        r[0]
        for r in mysql_db.query(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
            " AND TABLE_NAME = 'bulkload_chunk_ledger'"
        )
    }
    assert {"probe", "generation"} <= columns
    assert mysql_db.query("SELECT count(*) FROM bulkload_chunk_ledger") == [(2,)]


def test_a_postgres_state_schema_at_version_3_is_migrated(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    from airflow_bulkload.dialects.postgres.migrations import MIGRATIONS

    with closing(pg_db.connect()) as conn:
        conn.execute("CREATE SCHEMA bulkload")
        conn.execute(
            "CREATE TABLE bulkload.schema_migrations (version integer PRIMARY KEY,"
            " description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, description, statement in MIGRATIONS[:3]:
            conn.execute(statement)
            conn.execute(
                "INSERT INTO bulkload.schema_migrations (version, description) VALUES (%s, %s)",
                (version, description),
            )
    pg_db.query("CREATE TABLE notes (id int PRIMARY KEY, note text)")
    chunk = put_chunk(moto_server, s3_bucket, "c0.csv.gz", b"1,a\n2,b\n", rows=2)

    assert BulkLoadHook(conn_id=pg_db.conn_id).load_chunk("notes", chunk).rows == 2
    assert pg_db.query("SELECT max(version) FROM bulkload.schema_migrations") == [
        (MIGRATIONS[-1][0],)
    ]
