"""The pre-flight rules: pure functions from plain inputs to findings.

Each rule takes the inputs, the plan the load will run with (the author's knobs over the
recommended ones) and the recommended plan, and returns its findings. Every finding cites the
measured effect it rests on (:mod:`airflow_bulkload.advice.evidence`).

One module per theme: :mod:`.keys` (the primary key), :mod:`.indexes` (indexes, foreign keys,
triggers and partitions), :mod:`.input` (the input's columns, chunk sizes, parallelism),
:mod:`.server` (the instance and server), :mod:`.methods` (what a load method needs) and
:mod:`.modes` (which load mode fits);
:mod:`.context` holds what they all take. :data:`RULES` is the order they run in.
"""

from __future__ import annotations

from airflow_bulkload.advice.rules.context import Rule, RuleContext
from airflow_bulkload.advice.rules.indexes import (
    foreign_keys,
    partitioned_table,
    redundant_indexes,
    secondary_indexes,
    triggers,
)
from airflow_bulkload.advice.rules.input import chunk_sizes, input_columns, parallelism
from airflow_bulkload.advice.rules.keys import (
    input_not_in_key_order,
    no_primary_key,
    random_primary_key,
    wide_primary_key,
)
from airflow_bulkload.advice.rules.methods import aurora_s3_role, aws_s3_extension, local_infile
from airflow_bulkload.advice.rules.modes import load_mode
from airflow_bulkload.advice.rules.server import (
    anti_patterns_in_place,
    checkpoint_privilege,
    default_parameter_group,
    maintenance_window,
    storage_iops,
)

RULES: tuple[Rule, ...] = (
    no_primary_key,
    random_primary_key,
    wide_primary_key,
    input_not_in_key_order,
    secondary_indexes,
    redundant_indexes,
    foreign_keys,
    input_columns,
    load_mode,
    partitioned_table,
    checkpoint_privilege,
    triggers,
    chunk_sizes,
    parallelism,
    storage_iops,
    maintenance_window,
    default_parameter_group,
    local_infile,
    aws_s3_extension,
    aurora_s3_role,
    anti_patterns_in_place,
)

__all__ = ["RULES", "Rule", "RuleContext"]
