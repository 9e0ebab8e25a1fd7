"""Hostile staging_extra_args: S3 upload arguments of every object staging writes (moto S3)."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.staging.stager import StageResult
from tests.harness import MotoServer
from tests.integration.test_hostile_gzip import csv_body, put
from tests.support.staging import stage_input


def run_stage(
    moto: MotoServer,
    bucket: str,
    args: Any,
    *,
    direct: bool = False,
    group_bytes: int | None = None,
) -> StageResult:
    return stage_input(
        moto, bucket, group_bytes=group_bytes, chunk_size=20_000, direct=direct, upload_args=args
    )


def staged_keys(moto: MotoServer, bucket: str) -> list[str]:
    listed = moto.client("s3").list_objects_v2(Bucket=bucket, Prefix="staging/")
    return [o["Key"] for o in listed.get("Contents", [])]


@pytest.mark.parametrize("direct", [False, True], ids=["staged", "direct"])
@pytest.mark.parametrize(
    "args",
    [{"ChecksumType": "FULL_OBJECT"}, {"MpuObjectSize": 5}],
    ids=["ChecksumType", "MpuObjectSize"],
)
def test_upload_args_put_object_does_not_take_are_refused_before_anything_is_written(
    moto_server: MotoServer, s3_bucket: str, args: dict[str, Any], direct: bool
) -> None:
    """What I did: staging_extra_args={"ChecksumType": "FULL_OBJECT"} (or MpuObjectSize):
    both are in boto3's S3Transfer.ALLOWED_UPLOAD_ARGS, so check_upload_args lets them through.

    What happened: staging downloaded, normalized and uploaded every chunk (s3transfer drops
    those keys for a single PUT), then write_manifest's put_object failed with a raw
    botocore ParamValidationError 'Unknown parameter in input: "ChecksumType"', leaving 4
    chunks and no manifest (direct: the same raw error at the manifest). Every retry repeats it.

    What should happen: a ValueError naming the key before anything is read or written
    (check_upload_args should also check the keys put_object takes: write_manifest uses it).
    """
    put(moto_server, s3_bucket, csv_body(2_000), key="in/a.csv")
    with pytest.raises(ValueError, match=next(iter(args))):
        run_stage(moto_server, s3_bucket, args, direct=direct)
    assert staged_keys(moto_server, s3_bucket) == []


@pytest.mark.parametrize(
    "args",
    [
        {"Metadata": {"rows": 1}},
        {"Metadata": "owner=etl"},
        {"StorageClass": None},
        {"ServerSideEncryption": 5},
    ],
    ids=["metadata-int-value", "metadata-str", "None", "int"],
)
def test_upload_arg_values_of_the_wrong_type_are_refused_before_reading(
    moto_server: MotoServer, s3_bucket: str, args: dict[str, Any]
) -> None:
    """What I did: right keys, wrong value types (a Param or template rendering an int, None,
    a metadata string).

    What happened: check_upload_args looks at keys only; the input was downloaded and
    normalized, then the first chunk upload failed with a raw botocore ParamValidationError
    ("Invalid type for parameter StorageClass, value: None") or, for Metadata {"rows": 1}, a
    raw "AttributeError: 'int' object has no attribute 'encode'" from botocore's serializer.

    What should happen: a ValueError naming staging_extra_args' bad key and value before the
    input is read (as the docstring promises for keys).
    """
    put(moto_server, s3_bucket, csv_body(2_000), key="in/a.csv")
    with pytest.raises((ValueError, BulkLoadError), match=next(iter(args))):
        run_stage(moto_server, s3_bucket, args)
    assert staged_keys(moto_server, s3_bucket) == []


def test_an_sse_c_key_is_not_copied_into_the_staging_groups(
    moto_server: MotoServer, s3_bucket: str
) -> None:
    """What I did: staging_extra_args with SSE-C (SSECustomerAlgorithm/SSECustomerKey/
    SSECustomerKeyMD5, all in ALLOWED_UPLOAD_ARGS) on an input planned in 2 staging groups.

    What happened: the groups PlanStagingOperator returns (its XCom, shown in the UI and kept
    in the metadata database) carry options.upload_args, the customer key included, in clear.
    Also, nothing that reads staged objects (read_manifest, the load tasks' get_object) passes
    the SSE-C key, so on real S3 every staged object would be unreadable (moto does not
    enforce SSE-C, so that part is not shown here).

    What should happen: SSE-C arguments are refused (staging cannot read back what it wrote),
    or at least never copied into XCom.
    """
    key = b"k" * 32
    args = {
        "SSECustomerAlgorithm": "AES256",
        "SSECustomerKey": base64.b64encode(key).decode(),
        "SSECustomerKeyMD5": base64.b64encode(hashlib.md5(key).digest()).decode(),
    }
    put(moto_server, s3_bucket, csv_body(2_000), key="in/a.csv")
    put(moto_server, s3_bucket, csv_body(2_000), key="in/b.csv")
    try:
        result = run_stage(moto_server, s3_bucket, args, group_bytes=50_000)
    except ValueError:
        return  # refused: fine
    assert len(result.groups) == 2
    assert args["SSECustomerKey"] not in json.dumps([g.to_dict() for g in result.groups])
