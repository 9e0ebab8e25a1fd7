"""Staging: turning input files into load-ready S3 chunks plus a manifest."""

from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat, Manifest

__all__ = ["ChunkSpec", "FileFormat", "Manifest"]
