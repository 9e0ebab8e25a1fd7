"""Rules on the load method: what ``client``, ``rds_s3`` and ``aurora_s3`` need from the server."""

from __future__ import annotations

from collections.abc import Iterator

from airflow_bulkload.advice import evidence as ev
from airflow_bulkload.advice.models import Finding
from airflow_bulkload.advice.rules.context import ERROR, RuleContext


def local_infile(ctx: RuleContext) -> Iterator[Finding]:
    server = ctx.inputs.server
    if not ctx.inputs.traits.client_load_uses_local_infile or ctx.inputs.options.method != "client":
        return
    if server is None or server.local_infile is not False:
        return
    yield Finding(
        "local_infile",
        ERROR,
        "The server has local_infile = OFF: LOAD DATA LOCAL INFILE (method='client') will be refused.",
        "Set local_infile = 1 in the instance's custom parameter group (a dynamic parameter), or on "
        "Aurora MySQL use method='aurora_s3'.",
        (ev.LOCAL_INFILE,),
    )


def aws_s3_extension(ctx: RuleContext) -> Iterator[Finding]:
    method = ctx.inputs.options.method
    if method != "rds_s3" or method not in ctx.inputs.traits.server_side_methods:
        return
    server, instance = ctx.inputs.server, ctx.inputs.instance
    if server is not None and server.aws_s3_installed is False:
        available = server.aws_s3_available
        yield Finding(
            "aws_s3_extension",
            ERROR,
            "method='rds_s3' needs the aws_s3 extension, which is not installed in this database"
            + ("." if available else " and not available on this server (not RDS/Aurora)."),
            "Run CREATE EXTENSION aws_s3 CASCADE as the database owner."
            if available
            else "Use method='client' on a server without aws_s3.",
            (ev.AWS_S3_EXTENSION,),
        )
    if instance is not None and not instance.s3_import_roles:
        yield Finding(
            "s3_role",
            ERROR,
            f"{instance.cluster_identifier or instance.identifier} has no IAM role associated for "
            "the s3Import feature: aws_s3.table_import_from_s3 cannot read the bucket.",
            "Associate a role allowing s3:GetObject/s3:ListBucket on the bucket: "
            + (
                "add-role-to-db-cluster --feature-name s3Import."
                if instance.is_aurora
                else "add-role-to-db-instance --feature-name s3Import."
            ),
            (ev.AWS_S3_EXTENSION,),
        )


_AURORA_S3_PARAMETERS = ("aurora_load_from_s3_role", "aws_default_s3_role")


def aurora_s3_role(ctx: RuleContext) -> Iterator[Finding]:
    method = ctx.inputs.options.method
    if method != "aurora_s3" or method not in ctx.inputs.traits.server_side_methods:
        return
    server, instance = ctx.inputs.server, ctx.inputs.instance
    if instance is not None and not instance.is_aurora:
        yield Finding(
            "s3_role",
            ERROR,
            f"method='aurora_s3' (LOAD DATA FROM S3) exists only on Aurora MySQL; "
            f"{instance.identifier} runs {instance.engine}.",
            "Use method='client' (LOAD DATA LOCAL INFILE fed by the worker).",
            (ev.AURORA_S3_ROLE,),
        )
        return
    known_from_server = server is not None and server.s3_role is not None
    if known_from_server and server is not None and server.s3_role:
        return
    if instance is not None and any(
        instance.s3_role_parameters.get(p) for p in _AURORA_S3_PARAMETERS
    ):
        return
    if not known_from_server and instance is None:
        return  # nothing to judge by
    yield Finding(
        "s3_role",
        ERROR,
        "method='aurora_s3' needs an IAM role in aurora_load_from_s3_role or aws_default_s3_role; "
        "neither is set"
        + (f" for {instance.cluster_identifier or instance.identifier}." if instance else "."),
        "Associate a role allowing s3:GetObject/s3:ListBucket with the cluster "
        "(add-role-to-db-cluster) and set aws_default_s3_role to its ARN in the DB cluster "
        "parameter group.",
        (ev.AURORA_S3_ROLE,),
    )
