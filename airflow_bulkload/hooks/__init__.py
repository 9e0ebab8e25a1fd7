"""Hooks: the database side (BulkLoadHook) and, later, the RDS bulk-mode side."""

from airflow_bulkload.hooks.bulk_load import BulkLoadHook, ChunkResult
from airflow_bulkload.hooks.bulk_mode import BulkModeHook
from airflow_bulkload.hooks.table_state import TableStateHook

__all__ = ["BulkLoadHook", "BulkModeHook", "ChunkResult", "TableStateHook"]
