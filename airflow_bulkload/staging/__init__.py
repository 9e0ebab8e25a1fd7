"""Staging: turning input files into load-ready S3 chunks plus a manifest."""

from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat, Manifest
from airflow_bulkload.staging.planning import STAGED_FORMAT

__all__ = ["STAGED_FORMAT", "ChunkSpec", "FileFormat", "Manifest"]
