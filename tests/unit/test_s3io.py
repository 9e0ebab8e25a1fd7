from __future__ import annotations

import pytest

from airflow_bulkload.s3io import check_upload_args, parse_s3_uri


def test_parse_s3_uri() -> None:
    assert parse_s3_uri("s3://bucket/a/b.csv") == ("bucket", "a/b.csv")
    assert parse_s3_uri("s3://bucket") == ("bucket", "")
    with pytest.raises(ValueError):
        parse_s3_uri("/local/file")


def test_upload_args_are_boto3s_less_what_staging_sets_itself() -> None:
    check_upload_args({"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "k", "ACL": "private"})
    check_upload_args({})
    with pytest.raises(ValueError, match=r"\['Bucket', 'ContentType'\].*allowed: ACL"):
        check_upload_args({"ContentType": "x", "Bucket": "b", "StorageClass": "STANDARD_IA"})
