"""Pure rules of bulk mode: which settings, which are safe, leases and their expiry.

No I/O here; the RDS backend (:mod:`airflow_bulkload.bulk_mode.rds`) and the self-managed one
(:mod:`airflow_bulkload.hooks.bulk_mode`) apply these rules to a real instance or server.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from airflow_bulkload.exceptions import BulkModeRefusedError

RebootPolicy = Literal["never", "allowed"]
Strategy = Literal["auto", "modify-in-place", "swap"]
REBOOT_POLICIES: tuple[str, ...] = ("never", "allowed")
STRATEGIES: tuple[str, ...] = ("auto", "modify-in-place", "swap")

#: Dynamic PostgreSQL settings, as RDS parameter values (kB, MB, s) — the values the AWS guide
#: "optimized bulk loading in Amazon RDS for PostgreSQL" measured.
RDS_POSTGRES_BULK_SETTINGS: dict[str, str] = {
    "maintenance_work_mem": "1048576",  # 1 GB in kB: faster index rebuilds after the load
    "max_wal_size": "4096",  # 4 GB in MB: fewer forced checkpoints during COPY
    "checkpoint_timeout": "1800",  # 30 min in s
}
#: The same for a self-managed server, where ALTER SYSTEM accepts units.
SERVER_POSTGRES_BULK_SETTINGS: dict[str, str] = {
    "maintenance_work_mem": "1GB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "30min",
}
#: Aurora PostgreSQL has no WAL checkpoints to tune (its storage layer replaces them); only the
#: index-rebuild memory matters, set in the writer instance's DB parameter group.
AURORA_POSTGRES_BULK_SETTINGS: dict[str, str] = {"maintenance_work_mem": "1048576"}
#: MySQL: dynamic only, nothing that trades durability. Raising the I/O budget lets background
#: flushing keep up with a write-bound load instead of stalling in sync flushes. The order matters
#: (capacity may never exceed capacity_max): applied in this order, restored in reverse.
MYSQL_BULK_SETTINGS: dict[str, str] = {
    "innodb_io_capacity_max": "4000",
    "innodb_io_capacity": "2000",
}
#: Aurora MySQL has no checkpoint/flush knobs worth changing for a load (its storage layer does
#: the flushing); by default bulk mode changes nothing there. Pass settings to override.
AURORA_MYSQL_BULK_SETTINGS: dict[str, str] = {}

#: Settings that need a restart/reboot whatever the parameter metadata says (belt and braces: RDS
#: reports ApplyType, a self-managed server reports the context).
KNOWN_STATIC_SETTINGS = frozenset(
    {
        "innodb_log_file_size",
        "innodb_log_buffer_size",
        "innodb_doublewrite",
        "innodb_log_files_in_group",
        "innodb_buffer_pool_instances",
        "shared_buffers",
        "wal_buffers",
        "max_connections",
    }
)
_DOUBLEWRITE_OFF_VALUES = frozenset(
    {"0", "off", "false", "no", "detect_only", "detect_and_recover"}
)
_SETTING_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,62}$")


def default_bulk_settings(engine: str, *, rds: bool) -> dict[str, str]:
    """The default bulk settings for ``engine``, on RDS or a self-managed server.

    ``engine`` is an RDS engine name (``postgres``, ``aurora-postgresql``, ``mysql``, ``mariadb``,
    ``aurora-mysql``) or a dialect name.
    """
    kind = engine.lower()
    if kind.startswith("aurora") and "postgres" in kind:
        return dict(AURORA_POSTGRES_BULK_SETTINGS)
    if "postgres" in kind:
        return dict(RDS_POSTGRES_BULK_SETTINGS if rds else SERVER_POSTGRES_BULK_SETTINGS)
    if kind.startswith("aurora"):
        return dict(AURORA_MYSQL_BULK_SETTINGS)
    if kind in ("mysql", "mariadb"):
        return dict(MYSQL_BULK_SETTINGS)
    raise BulkModeRefusedError(f"no bulk-mode settings for engine {engine!r}")


def resolve_bulk_settings(
    engine: str, overrides: Mapping[str, object] | None, *, rds: bool
) -> dict[str, str]:
    """The defaults merged with ``overrides``, checked.

    A value of ``None`` drops a default. Names are checked, and every durability-breaking setting is
    refused (see :func:`durability_risk`).
    """
    settings = default_bulk_settings(engine, rds=rds)
    for name, value in (overrides or {}).items():
        if value is None:
            settings.pop(name, None)
        else:
            settings[name] = str(value)
    for name, value in settings.items():
        check_setting_name(name)
        risk = durability_risk(name, value)
        if risk:
            raise BulkModeRefusedError(
                f"refusing {name}={value}: {risk}; bulk mode never trades the server's durability "
                "(it is server-wide: every database and application on it would be exposed)"
            )
    return settings


#: every spelling of false: PostgreSQL takes any unique prefix of false/no/off (``fals``, ``of``)
_OFF_VALUES = frozenset({"0", "off", "of", "false", "fals", "fal", "fa", "f", "no", "n"})
#: name -> (is the value unsafe, why), for settings that trade durability server-wide
_DURABILITY: dict[str, tuple[frozenset[str] | None, str]] = {
    "fsync": (_OFF_VALUES, "without fsync an OS crash or power loss corrupts every database"),
    "full_page_writes": (
        _OFF_VALUES,
        "without full-page writes a crash mid-write leaves torn pages WAL cannot repair",
    ),
    "synchronous_commit": (
        _OFF_VALUES,
        "a global synchronous_commit = off loses every application's last commits in a crash "
        "(the load turns it off for its own transactions only, SET LOCAL)",
    ),
    "innodb_flush_log_at_trx_commit": (
        frozenset({"0", "2"}),
        "0 or 2 lose up to a second of every application's commits in a crash",
    ),
    "innodb_flush_method": (
        frozenset({"nosync"}),
        "nosync never flushes data files: a crash corrupts InnoDB",
    ),
}


def durability_risk(name: str, value: object) -> str | None:
    """Why setting ``name`` to ``value`` would break the server's crash safety, or ``None``.

    Names and values are compared case-insensitively, ``-`` as ``_``: PostgreSQL ``fsync``,
    ``full_page_writes`` and a global ``synchronous_commit`` off; InnoDB doublewrite off,
    ``innodb_flush_log_at_trx_commit`` 0 or 2, ``innodb_flush_method = nosync``.
    """
    normalized = name.strip().lower().replace("-", "_")
    if is_doublewrite_off(normalized, str(value)):
        return (
            "turning off the InnoDB doublewrite buffer risks torn pages and silent data "
            "corruption after a crash"
        )
    rule = _DURABILITY.get(normalized)
    if rule is None:
        return None
    unsafe, why = rule
    v = str(value).strip().lower()
    return why if unsafe is not None and v in unsafe else None


def check_setting_name(name: str) -> str:
    if not isinstance(name, str) or not _SETTING_NAME.match(name):
        raise BulkModeRefusedError(
            f"{name!r} is not a valid server setting name (letters, digits, '_', '.', '-')"
        )
    return name


def is_doublewrite_off(name: str, value: str) -> bool:
    normalized = name.lower().replace("-", "_")
    v = str(value).strip().lower()
    if normalized == "innodb_doublewrite":
        return v in _DOUBLEWRITE_OFF_VALUES
    if normalized == "skip_innodb_doublewrite":
        return v not in ("0", "off", "false", "no")
    return False


def refuse_static(static_names: list[str], reboot_policy: str, where: str) -> None:
    """Static settings only take effect after a reboot: refuse them unless the policy allows one."""
    if static_names and reboot_policy != "allowed":
        raise BulkModeRefusedError(
            f"{', '.join(sorted(static_names))} on {where} only take(s) effect after a reboot; "
            "pass reboot_policy='allowed' to let bulk mode reboot (twice: on enter and on exit), "
            "or drop these settings"
        )


def check_reboot_policy(policy: str) -> str:
    if policy not in REBOOT_POLICIES:
        raise ValueError(f"reboot_policy must be one of {REBOOT_POLICIES}, got {policy!r}")
    return policy


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    return strategy


#: how long a load is assumed to take when nobody said, for the maintenance-window warning
DEFAULT_LOAD_DURATION = timedelta(hours=2)


@dataclass(frozen=True)
class BulkModeOptions:
    """How to enter bulk mode, whatever the server: the settings and what bulk mode may do.

    ``settings``: overrides of the engine's default bulk settings (``None`` as a value drops a
    default). ``strategy`` (``auto``, ``modify-in-place``, ``swap``), ``reboot_policy`` (``never``,
    ``allowed``) and ``expected_load_duration`` (warn when the maintenance window falls within
    it) apply to RDS only.
    """

    settings: Mapping[str, Any] | None = None
    strategy: str = "auto"
    reboot_policy: str = "never"
    expected_load_duration: timedelta | None = None

    def checked(self) -> BulkModeOptions:
        """These options, once ``strategy`` and ``reboot_policy`` are known (``ValueError``)."""
        check_strategy(self.strategy)
        check_reboot_policy(self.reboot_policy)
        return self

    @property
    def load_duration(self) -> timedelta:
        return self.expected_load_duration or DEFAULT_LOAD_DURATION


# -- leases ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseKey:
    """Who holds bulk mode: one table of one DAG run. A re-run of the same run gets the same key."""

    dag_id: str
    table: str
    logical_date: str

    @property
    def token(self) -> str:
        """A short, stable, tag- and SQL-safe id for the key."""
        raw = "\x1f".join((self.dag_id, self.table, self.logical_date)).encode()
        return hashlib.sha256(raw).hexdigest()[:20]

    def describe(self) -> str:
        return f"{self.dag_id}/{self.table}/{self.logical_date}"

    @classmethod
    def of(cls, dag_id: str, table: str, logical_date: datetime | str | None) -> LeaseKey:
        when = logical_date.isoformat() if isinstance(logical_date, datetime) else logical_date
        return cls(dag_id, table, when or "-")


@dataclass(frozen=True)
class Lease:
    token: str
    expires_at: float  # epoch seconds
    holder: str = ""

    def expired(self, now: float) -> bool:
        return self.expires_at <= now


def split_leases(leases: list[Lease], now: float) -> tuple[list[Lease], list[Lease]]:
    """(live, expired)."""
    live = [lease for lease in leases if not lease.expired(now)]
    return live, [lease for lease in leases if lease.expired(now)]


def ttl_seconds(ttl: timedelta | float | int) -> float:
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if seconds <= 0:
        raise ValueError(f"lease TTL must be positive, got {ttl!r}")
    return seconds


# -- encoding values into RDS tags (only letters, digits, spaces and _.:/=+-@ are allowed) -------

TAG_PREFIX = "bulkload:"
_TAG_SAFE = re.compile(r"[^A-Za-z0-9 _.:/=+\-@]")
TAG_VALUE_MAX = 256


def encode_tag_value(value: str | None) -> str:
    """``-`` for "not set in the group" (engine default), else ``=`` + base64url of the value."""
    if value is None:
        return "-"
    encoded = "=" + base64.urlsafe_b64encode(value.encode()).decode()
    if len(encoded) > TAG_VALUE_MAX:
        raise BulkModeRefusedError(
            f"the original value {value[:40]!r}... is too long to record in a tag; "
            "bulk mode cannot promise to restore it"
        )
    return encoded


def decode_tag_value(text: str) -> str | None:
    if text == "-":
        return None
    if not text.startswith("="):
        raise ValueError(f"not an encoded bulk-mode value: {text!r}")
    return base64.urlsafe_b64decode(text[1:].encode()).decode()


def tag_safe(text: str, limit: int = 200) -> str:
    return _TAG_SAFE.sub("_", text)[:limit]


# -- maintenance window ---------------------------------------------------------------------------

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def maintenance_window_overlaps(window: str, start: datetime, duration: timedelta) -> bool:
    """Whether the weekly UTC window ``ddd:hh:mm-ddd:hh:mm`` (RDS format) meets [start, start+duration)."""
    match = re.fullmatch(r"(\w{3}):(\d\d):(\d\d)-(\w{3}):(\d\d):(\d\d)", window.strip().lower())
    if not match:
        return False
    d1, h1, m1, d2, h2, m2 = match.groups()
    week = 7 * 24 * 60
    w_start = _DAYS.index(d1) * 1440 + int(h1) * 60 + int(m1)
    w_end = _DAYS.index(d2) * 1440 + int(h2) * 60 + int(m2)
    if w_end <= w_start:
        w_end += week
    s = start.weekday() * 1440 + start.hour * 60 + start.minute
    e = s + max(1, int(duration.total_seconds() // 60))
    # compare against this week's, last week's and next week's occurrence
    return any(s < w_end + k * week and w_start + k * week < e for k in (-1, 0, 1))
