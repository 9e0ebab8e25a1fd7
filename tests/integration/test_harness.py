"""The harness itself: real servers answer, and a database server can pull from the moto S3 server."""

from __future__ import annotations

import os
import shlex

from psycopg import sql

from tests.harness import MotoServer, TestDatabase


def test_postgres_pulls_an_object_from_the_moto_server(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    s3 = moto_server.client("s3")
    s3.put_object(Bucket=s3_bucket, Key="in/rows.csv", Body=b"1,alpha\n2,beta\n3,gamma\n")
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": s3_bucket, "Key": "in/rows.csv"}, ExpiresIn=300
    )
    pg_db.query("CREATE TABLE pulled (id int PRIMARY KEY, name text)")
    with pg_db.connect() as conn:
        conn.execute(
            sql.SQL("COPY pulled FROM PROGRAM {} WITH (FORMAT csv)").format(
                sql.Literal(f"curl -sSf {shlex.quote(url)}")
            )
        )
    assert pg_db.query("SELECT id, name FROM pulled ORDER BY id") == [
        (1, "alpha"),
        (2, "beta"),
        (3, "gamma"),
    ]


def test_mariadb_database_is_fresh_and_loads_local_infile(mysql_db: TestDatabase, tmp_path) -> None:
    assert mysql_db.query("SHOW TABLES") == []
    mysql_db.query("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(10)) ENGINE=InnoDB")
    data = tmp_path / "rows.csv"
    data.write_text("1,alpha\n2,beta\n")
    conn = mysql_db.connect(local_infile=1)
    try:
        conn.cursor().execute(
            "LOAD DATA LOCAL INFILE %s INTO TABLE t FIELDS TERMINATED BY ','", (str(data),)
        )
    finally:
        conn.close()
    assert mysql_db.query("SELECT id, name FROM t ORDER BY id") == [(1, "alpha"), (2, "beta")]


def test_airflow_connections_point_at_the_test_servers(
    pg_db: TestDatabase, mysql_db: TestDatabase, moto_server: MotoServer
) -> None:
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook
    from airflow.providers.mysql.hooks.mysql import MySqlHook
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    assert PostgresHook(postgres_conn_id=pg_db.conn_id).get_first("SELECT current_database()") == (
        pg_db.name,
    )
    assert MySqlHook(mysql_conn_id=mysql_db.conn_id).get_first("SELECT DATABASE()") == (
        mysql_db.name,
    )
    hook = S3Hook(aws_conn_id="aws_default")
    hook.create_bucket("harness-check")
    assert hook.check_for_bucket("harness-check")
    assert os.environ["AIRFLOW_HOME"].startswith(os.environ["BULKLOAD_TEST_AIRFLOW_HOME"])
