"""Deferrable waits."""

from airflow_bulkload.triggers.bulk_mode import RdsParameterGroupInSyncTrigger
from airflow_bulkload.triggers.db_waits import LoadSlotFreeTrigger, TableClaimTrigger

__all__ = ["LoadSlotFreeTrigger", "RdsParameterGroupInSyncTrigger", "TableClaimTrigger"]
