"""Hooks: the database side (BulkLoadHook, TableStateHook, LoadModesHook) and bulk mode."""

from airflow_bulkload.hooks.bulk_load import BulkLoadHook, ChunkResult
from airflow_bulkload.hooks.bulk_mode import BulkModeHook
from airflow_bulkload.hooks.load_modes import LoadModesHook
from airflow_bulkload.hooks.table_state import TableStateHook

__all__ = ["BulkLoadHook", "BulkModeHook", "ChunkResult", "LoadModesHook", "TableStateHook"]
