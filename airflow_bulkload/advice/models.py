"""Plain inputs and outputs of the pre-flight rules; everything round-trips through XCom dicts."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from airflow_bulkload.advice.evidence import Evidence
from airflow_bulkload.catalog import EngineTraits, ServerFacts, TableInfo
from airflow_bulkload.staging.manifest import ChunkSpec, Manifest

MB = 1_000_000
GB = 1_000_000_000


class Severity(StrEnum):
    INFO = "info"
    WARN = "warn"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return ("info", "warn", "error").index(self.value)


@dataclass(frozen=True)
class Finding:
    """One piece of advice: what is wrong, the measured reason, and what to do about it."""

    rule: str
    severity: Severity
    message: str
    fix: str
    evidence: tuple[Evidence, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "message": self.message,
            "fix": self.fix,
            "evidence": [e.to_dict() for e in self.evidence],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            rule=data["rule"],
            severity=Severity(data["severity"]),
            message=data["message"],
            fix=data["fix"],
            evidence=tuple(Evidence.from_dict(e) for e in data.get("evidence", ())),
        )


@dataclass(frozen=True)
class InputSummary:
    """What is known of the data to load: a staged manifest's chunks, or only an estimate.

    ``chunk_bytes`` are the stored (possibly gzip) object sizes, empty when not staged yet;
    ``raw_bytes`` is the uncompressed size when known; ``sorted_by`` the key the rows are in order of.
    """

    total_bytes: int
    total_rows: int | None = None
    raw_bytes: int | None = None
    chunk_bytes: tuple[int, ...] = ()
    sorted_by: tuple[str, ...] | None = None
    #: the input's column names in file order (header or ``columns``); None: the table's, in order
    columns: tuple[str, ...] | None = None

    @property
    def staged(self) -> bool:
        return bool(self.chunk_bytes)

    @property
    def chunk_count(self) -> int:
        return len(self.chunk_bytes)

    @property
    def data_bytes(self) -> int:
        """Best estimate of the bytes the table will take on: raw when known, else stored."""
        return self.raw_bytes if self.raw_bytes is not None else self.total_bytes

    @classmethod
    def from_chunks(
        cls,
        chunks: Iterable[ChunkSpec | Mapping[str, Any]],
        sorted_by: Sequence[str] | None = None,
    ) -> InputSummary:
        specs = sorted(
            (ChunkSpec.from_dict(dict(c) if isinstance(c, Mapping) else c) for c in chunks),
            key=lambda c: c.index,
        )
        raws = [c.raw_bytes for c in specs]
        rows = [c.rows for c in specs]
        return cls(
            total_bytes=sum(c.bytes for c in specs),
            total_rows=None if None in rows else sum(r or 0 for r in rows),
            raw_bytes=None if None in raws or not raws else sum(r or 0 for r in raws),
            chunk_bytes=tuple(c.bytes for c in specs),
            sorted_by=tuple(sorted_by) if sorted_by else None,
        )

    @classmethod
    def from_manifest(cls, manifest: Manifest) -> InputSummary:
        summary = cls.from_chunks(manifest.chunks, manifest.sort_key)
        if manifest.columns:
            summary = replace(summary, columns=tuple(manifest.columns))
        if manifest.total_rows and summary.total_rows is None:
            summary = replace(summary, total_rows=manifest.total_rows)
        return summary

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InputSummary:
        values = dict(data)
        values["chunk_bytes"] = tuple(values.get("chunk_bytes") or ())
        for name in ("sorted_by", "columns"):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        return cls(**{k: v for k, v in values.items() if k in {f.name for f in fields(cls)}})


@dataclass(frozen=True)
class InstanceSummary:
    """What pre-flight needs of an RDS instance (or an Aurora cluster's writer)."""

    identifier: str
    engine: str
    instance_class: str = ""
    vcpus: int | None = None
    engine_version: str = ""
    storage_type: str = ""
    allocated_gb: int = 0
    iops: int | None = None
    multi_az: bool = False
    maintenance_windows: tuple[str, ...] = ()
    parameter_groups: tuple[str, ...] = ()
    cluster_identifier: str | None = None
    cluster_parameter_group: str | None = None
    s3_import_roles: tuple[str, ...] = ()
    s3_role_parameters: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_aurora(self) -> bool:
        return self.engine.startswith("aurora")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["s3_role_parameters"] = dict(self.s3_role_parameters)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InstanceSummary:
        values = {k: v for k, v in data.items() if k in {f.name for f in fields(cls)}}
        for name in ("maintenance_windows", "parameter_groups", "s3_import_roles"):
            values[name] = tuple(values.get(name) or ())
        return cls(**values)


@dataclass(frozen=True)
class LoadOptions:
    """The DAG author's knobs; ``None`` means "auto": the recommended plan decides."""

    method: str = "client"
    parallelism: int | None = None
    drop_indexes: bool | None = None
    sort: bool | None = None
    chunk_size: int | None = None
    vcpus: int | None = None
    load_start: datetime | None = None
    expected_duration: timedelta = timedelta(hours=1)
    bulk_mode: bool = True
    #: the load mode (see :mod:`airflow_bulkload.modes`)
    mode: str = "append"


@dataclass(frozen=True)
class PreflightInputs:
    """Everything the rules look at. Only ``engine`` and ``table`` are required."""

    engine: str
    table: TableInfo
    input: InputSummary | None = None
    instance: InstanceSummary | None = None
    server: ServerFacts | None = None
    options: LoadOptions = field(default_factory=LoadOptions)

    @property
    def traits(self) -> EngineTraits:
        """What the engine does differently (the rules read these, not the engine's name)."""
        return EngineTraits.of(self.engine)

    @property
    def vcpus(self) -> int | None:
        if self.options.vcpus:
            return self.options.vcpus
        return self.instance.vcpus if self.instance else None


AUTO = "auto"


@dataclass(frozen=True)
class LoadPlan:
    """The recommended knobs for the load; the pipeline uses them where the author left "auto".

    ``chunk_size`` is the target stored size of one staged chunk in bytes. ``drop_indexes`` means
    drop the table's secondary indexes before the load and rebuild them after. ``rationale`` says
    why each knob has its value.
    """

    parallelism: int
    drop_indexes: bool
    sort: bool
    chunk_size: int
    rationale: Mapping[str, str] = field(default_factory=dict)
    #: sessions that rebuild indexes after the load (nothing else runs then: vCPUs + 1)
    index_build_parallelism: int = 3

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rationale"] = dict(self.rationale)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoadPlan:
        return cls(
            parallelism=int(data["parallelism"]),
            drop_indexes=bool(data["drop_indexes"]),
            sort=bool(data["sort"]),
            chunk_size=int(data["chunk_size"]),
            rationale=dict(data.get("rationale") or {}),
            index_build_parallelism=int(data.get("index_build_parallelism") or 3),
        )

    def resolve(
        self,
        *,
        parallelism: int | str | None = AUTO,
        drop_indexes: bool | str | None = AUTO,
        sort: bool | str | None = AUTO,
        chunk_size: int | str | None = AUTO,
    ) -> LoadPlan:
        """The plan with the author's explicit knobs applied; ``"auto"``/``None`` keep the plan's."""
        rationale = dict(self.rationale)

        def pick(name: str, value: Any, planned: Any, cast: Any) -> Any:
            if value is None or value == AUTO:
                return planned
            chosen = cast(value)
            if chosen != planned:
                rationale[name] = (
                    f"set by the DAG author (advice: {planned}: {rationale.get(name, '')})"
                )
            return chosen

        return replace(
            self,
            parallelism=pick("parallelism", parallelism, self.parallelism, int),
            drop_indexes=pick("drop_indexes", drop_indexes, self.drop_indexes, _as_bool),
            sort=pick("sort", sort, self.sort, _as_bool),
            chunk_size=pick("chunk_size", chunk_size, self.chunk_size, int),
            rationale=rationale,
        )


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"expected a boolean or 'auto', got {value!r}")
    return bool(value)


FailOn = str | Sequence[str] | None


def failing_severities(fail_on: FailOn) -> set[Severity]:
    """The severities that fail the task, for ``fail_on``.

    ``"error"`` -> {error}; ``"warn"`` -> {warn, error}; a list names severities exactly;
    ``None``/``"never"`` -> nothing fails.
    """
    if fail_on is None or fail_on == "never":
        return set()
    if isinstance(fail_on, str):
        threshold = Severity(fail_on)
        return {s for s in Severity if s.rank >= threshold.rank}
    return {Severity(s) for s in fail_on}


@dataclass(frozen=True)
class PreflightReport:
    """The findings and the plan for one table.

    ``plan`` is what runs (the author's explicit knobs over the advice), ``recommended`` what
    pre-flight would choose with every knob auto.
    """

    table: str
    engine: str
    findings: tuple[Finding, ...]
    plan: LoadPlan
    recommended: LoadPlan | None = None

    def by_severity(self, *severities: Severity) -> list[Finding]:
        return [f for f in self.findings if f.severity in severities]

    def rules(self) -> set[str]:
        return {f.rule for f in self.findings}

    def failures(self, fail_on: FailOn = "error") -> list[Finding]:
        failing = failing_severities(fail_on)
        return [f for f in self.findings if f.severity in failing]

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "engine": self.engine,
            "findings": [f.to_dict() for f in self.findings],
            "plan": self.plan.to_dict(),
            "recommended": (self.recommended or self.plan).to_dict(),
            "counts": {s.value: len(self.by_severity(s)) for s in Severity},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PreflightReport:
        return cls(
            table=data["table"],
            engine=data["engine"],
            findings=tuple(Finding.from_dict(f) for f in data["findings"]),
            plan=LoadPlan.from_dict(data["plan"]),
            recommended=LoadPlan.from_dict(data["recommended"])
            if data.get("recommended")
            else None,
        )

    def format_table(self, width: int = 110) -> str:
        """A plain-text table for the task log: one block per finding, then the plan."""
        lines = [f"Pre-flight for {self.table} ({self.engine}): " + self._counts()]
        rule_width = max([len(f.rule) for f in self.findings] + [4])
        head = f"{'SEVERITY':<8} | {'RULE':<{rule_width}} | "
        text_width = max(width - len(head), 40)
        indent = f"{'':<8} | {'':<{rule_width}} | "
        if self.findings:
            lines.append(head + "FINDING")
            lines.append("-" * min(width, len(head) + text_width))
        for finding in sorted(self.findings, key=lambda f: (-f.severity.rank, f.rule)):
            first = True
            parts = [finding.message, f"fix: {finding.fix}"]
            parts += [f"based on: {e.cite()}" for e in finding.evidence]
            for part in parts:
                for line in textwrap.wrap(part, text_width, break_on_hyphens=False) or [""]:
                    prefix = (
                        f"{finding.severity.value.upper():<8} | {finding.rule:<{rule_width}} | "
                        if first
                        else indent
                    )
                    lines.append(prefix + line)
                    first = False
        lines.append(
            f"Plan: parallelism={self.plan.parallelism}, drop_indexes={self.plan.drop_indexes}, "
            f"sort={self.plan.sort}, chunk_size={format_bytes(self.plan.chunk_size)}"
        )
        for knob, why in self.plan.rationale.items():
            lines.extend(
                textwrap.wrap(
                    f"{knob}: {why}", width, initial_indent="  ", subsequent_indent="    "
                )
            )
        return "\n".join(lines)

    def _counts(self) -> str:
        if not self.findings:
            return "no findings"
        return ", ".join(f"{len(self.by_severity(s))} {s.value}" for s in reversed(Severity))


def format_bytes(n: int | float) -> str:
    for unit, size in (("GB", GB), ("MB", MB), ("kB", 1000)):
        if n >= size:
            value = n / size
            return (
                f"{value:.0f} {unit}"
                if value >= 10 or math.isclose(value, round(value))
                else f"{value:.1f} {unit}"
            )
    return f"{int(n)} B"
