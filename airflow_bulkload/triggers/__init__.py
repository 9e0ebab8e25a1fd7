"""Deferrable waits."""

from airflow_bulkload.triggers.bulk_mode import RdsParameterGroupInSyncTrigger

__all__ = ["RdsParameterGroupInSyncTrigger"]
