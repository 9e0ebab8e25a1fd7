from __future__ import annotations

import pytest

from airflow_bulkload.s3io import parse_s3_uri


def test_parse_s3_uri() -> None:
    assert parse_s3_uri("s3://bucket/a/b.csv") == ("bucket", "a/b.csv")
    assert parse_s3_uri("s3://bucket") == ("bucket", "")
    with pytest.raises(ValueError):
        parse_s3_uri("/local/file")
