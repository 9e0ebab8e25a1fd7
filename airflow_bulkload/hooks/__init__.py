"""Hooks: the database side (BulkLoadHook) and, later, the RDS bulk-mode side."""

from airflow_bulkload.hooks.bulk_load import BulkLoadHook, ChunkResult

__all__ = ["BulkLoadHook", "ChunkResult"]
