"""Operators, one per stage of a bulk load."""

from airflow_bulkload.operators.load_chunk import LoadChunkOperator

__all__ = ["LoadChunkOperator"]
