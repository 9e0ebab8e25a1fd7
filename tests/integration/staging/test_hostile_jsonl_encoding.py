"""Hostile JSON Lines: the input's declared encoding is silently ignored.

``normalize.check_input_format`` returns early for self-describing formats, so
``file_format={"format": "jsonl", "encoding": "latin-1"}`` passes, and DuckDB's ``read_json``
reads the bytes as UTF-8 whatever the encoding says. Latin-1 text that happens to be valid UTF-8
loads as other characters, with no error.
"""

from __future__ import annotations

from pathlib import Path

from airflow_bulkload.catalog import loadable_column_types, probe_key_of
from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StagingOptions, stage
from tests.harness import MotoServer, TestDatabase


def test_a_latin1_jsonl_file_loads_its_latin1_text(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """A latin-1 file, declared so, holding the two characters 'Ã©' (bytes C3 A9).

    Found: loads 'é' (the bytes read as UTF-8), no error; a latin-1 'é' alone (E9) fails with
    DuckDB's "invalid UTF-8 encoding in string". Expected: 'Ã©' loads (decoded as declared), or
    the encoding option is refused for jsonl before anything is read.
    """
    any_db.query("CREATE TABLE z (id int PRIMARY KEY, v text)")
    path = tmp_path / "a.jsonl"
    path.write_bytes('{"id": 1, "v": "Ã©"}\n'.encode("latin-1"))
    moto_server.client("s3").upload_file(str(path), s3_bucket, "in/a.jsonl")
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    info = hook.describe_table("z")
    types = loadable_column_types(info)

    try:
        staged = stage(
            f"s3://{s3_bucket}/in/",
            s3=moto_server.client("s3"),
            staging_uri=f"s3://{s3_bucket}/staging",
            dag_id="d",
            table="z",
            run="r",
            options=StagingOptions(
                file_format=FileFormat(format="jsonl", encoding="latin-1"),
                probe_key=probe_key_of(info),
                table_columns=list(types),
                table_types=types,
            ),
        )
    except (BulkLoadError, ValueError) as refused:
        assert "encoding" in str(refused), str(refused)
        return
    hook.reconcile("z", staged.manifest_uri, load_id="t")
    for chunk in staged.manifest.chunks:
        hook.load_chunk("z", chunk, load_id="t")

    assert any_db.query("SELECT v FROM z") == [("Ã©",)]
