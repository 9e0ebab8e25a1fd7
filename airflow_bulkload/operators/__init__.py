"""Operators, one per stage of a bulk load."""

from airflow_bulkload.bulk_mode.target import BulkModeTarget
from airflow_bulkload.operators.bulk_mode import EnterBulkModeOperator, ExitBulkModeOperator
from airflow_bulkload.operators.claim import ClaimTableOperator
from airflow_bulkload.operators.load_chunk import LoadChunkOperator
from airflow_bulkload.operators.preflight import PreflightCheckOperator
from airflow_bulkload.operators.report import LoadReportOperator
from airflow_bulkload.operators.stage import StageToS3Operator
from airflow_bulkload.operators.stage_groups import (
    CollectStagingOperator,
    PlanStagingOperator,
    StageGroupOperator,
)
from airflow_bulkload.operators.table import (
    CheckpointOperator,
    FinalizeTableOperator,
    PrepareTableOperator,
    RestoreTableOperator,
)
from airflow_bulkload.operators.wait_input import WaitForInputSensor
from airflow_bulkload.operators.withdraw import WithdrawSupersededChunksOperator

__all__ = [
    "BulkModeTarget",
    "CheckpointOperator",
    "ClaimTableOperator",
    "CollectStagingOperator",
    "EnterBulkModeOperator",
    "ExitBulkModeOperator",
    "FinalizeTableOperator",
    "LoadChunkOperator",
    "LoadReportOperator",
    "PlanStagingOperator",
    "PreflightCheckOperator",
    "PrepareTableOperator",
    "RestoreTableOperator",
    "StageGroupOperator",
    "StageToS3Operator",
    "WaitForInputSensor",
    "WithdrawSupersededChunksOperator",
]
