"""Synthetic inputs for the rule tests: tables, inputs and instances built in one line."""

from __future__ import annotations

from typing import Any

from airflow_bulkload.advice import InputSummary, InstanceSummary, LoadOptions, PreflightInputs
from airflow_bulkload.catalog import (
    ColumnInfo,
    ConstraintInfo,
    IndexInfo,
    ServerFacts,
    TableInfo,
    TableRef,
)

MB = 1_000_000
GB = 1_000_000_000


def table(
    *,
    pk: dict[str, str] | None = None,
    columns: dict[str, str] | None = None,
    indexes: dict[str, list[str]] | None = None,
    unique: tuple[str, ...] = (),
    fks: int = 0,
    triggers: tuple[str, ...] = (),
    size_bytes: int = 0,
    rows: int = 0,
    extra: dict[str, Any] | None = None,
    not_null: tuple[str, ...] = (),
) -> TableInfo:
    """``pk`` and ``columns`` map column name -> type; ``indexes`` name -> columns."""
    pk = {"id": "bigint"} if pk is None else pk
    cols = [ColumnInfo(name, kind, nullable=False) for name, kind in pk.items()]
    cols += [
        ColumnInfo(name, kind, nullable=name not in not_null)
        for name, kind in (columns or {"payload": "text"}).items()
    ]
    all_indexes = []
    if pk:
        all_indexes.append(
            IndexInfo("t_pkey", "PRIMARY KEY", list(pk), is_unique=True, is_primary=True)
        )
    for name, index_columns in (indexes or {}).items():
        all_indexes.append(
            IndexInfo(name, f"INDEX {name}", index_columns, is_unique=name in unique)
        )
    constraints = [
        ConstraintInfo(f"fk_{n}", "f", f"FOREIGN KEY (p{n}) REFERENCES parent{n}(id)")
        for n in range(fks)
    ]
    return TableInfo(
        table=TableRef("t", "s"),
        columns=cols,
        primary_key=list(pk),
        indexes=all_indexes,
        constraints=constraints,
        referencing_foreign_keys=[],
        triggers=list(triggers),
        reloptions={},
        estimated_rows=rows,
        size_bytes=size_bytes,
        extra=extra or {},
    )


def inputs(
    engine: str = "mysql",
    t: TableInfo | None = None,
    *,
    input: InputSummary | None = None,
    instance: InstanceSummary | None = None,
    server: ServerFacts | None = None,
    **options: Any,
) -> PreflightInputs:
    return PreflightInputs(
        engine=engine,
        table=t if t is not None else table(),
        input=input,
        instance=instance,
        server=server,
        options=LoadOptions(**options),
    )


def instance(**overrides: Any) -> InstanceSummary:
    values: dict[str, Any] = {
        "identifier": "db1",
        "engine": "postgres",
        "instance_class": "db.r6g.2xlarge",
        "vcpus": 8,
        "storage_type": "gp3",
        "allocated_gb": 500,
        "iops": 12000,
        "multi_az": True,
        "maintenance_windows": ("sun:05:00-sun:05:30",),
        "parameter_groups": ("bulk-pg16",),
        "s3_import_roles": ("arn:aws:iam::123456789012:role/s3import",),
    }
    values.update(overrides)
    return InstanceSummary(**values)


def staged(*sizes: int, sorted_by: tuple[str, ...] | None = None) -> InputSummary:
    return InputSummary(
        total_bytes=sum(sizes), chunk_bytes=tuple(sizes), sorted_by=sorted_by, total_rows=1000
    )
