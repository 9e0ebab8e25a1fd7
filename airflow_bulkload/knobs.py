"""Operator arguments as templates render them: flags, optional integers, parallelism.

A templated field (a Jinja template, a DAG Param given in the UI, an XCom) is known only when the
task runs, often as text; these helpers turn it into the value the code needs and refuse anything
else with a ``ValueError``. :func:`default_load_id` is the load id an operator uses when none is
given.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_bulkload.bulk_mode.policy import LeaseKey

AUTO = "auto"
_TRUE = "true"
_FALSE = "false"
_BOOL_TEXT = {_TRUE: True, _FALSE: False}


def parse_flag(value: bool | str | None, name: str) -> bool | None:
    """Parse a flag: ``True``/``False``/``"auto"`` -> ``True``/``False``/``None`` (auto).

    Strings count case-insensitively, as a Jinja template renders them. ``None`` means auto too.
    Anything else is refused.
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == AUTO):
        return None
    try:
        return parse_bool(value, name)
    except ValueError:
        raise ValueError(
            f"{name} must be True, False or 'auto' (any case), got {value!r}"
        ) from None


def parse_bool(value: bool | str, name: str) -> bool:
    """Parse a flag that has no ``"auto"``: ``True``/``False``, or their text in any case.

    ``None`` and ``"auto"`` are refused like anything else: such a flag (``reload``) decides
    what a load takes back out, so no value may stand for "off" without saying it.
    """
    if isinstance(value, bool):
        return value
    parsed = _BOOL_TEXT.get(value.strip().lower()) if isinstance(value, str) else None
    if parsed is not None:
        return parsed
    raise ValueError(f"{name} must be True or False (any case), got {value!r}")


def parse_optional_int(value: int | str | None, name: str) -> int | None:
    """An int, or ``None`` for ``None``/``""``/``"None"`` (a template that rendered nothing)."""
    if value is None or isinstance(value, bool):
        return None if value is None else int(value)
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text in ("", "None", "none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def parse_parallelism(
    value: int | str, builds: int, default: int, *, name: str = "parallelism"
) -> int:
    """``"auto"`` -> ``min(builds, default)``; else a positive int (capped at ``builds``)."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        wanted = default
    else:
        parsed = parse_optional_int(value, name)
        if parsed is None or parsed < 1:
            raise ValueError(f"{name} must be 'auto' or a positive integer, got {value!r}")
        wanted = parsed
    return max(1, min(wanted, max(builds, 1)))


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` when it is ``True`` or ``False``; refuse anything else (an untemplated bool)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


#: white space as the server reads it around and inside a setting (ASCII only)
_ASCII_SPACE = " \t\n\r\f\v"
#: a PostgreSQL memory setting as the server reads it: ASCII digits (no leading zero, which the
#: server would read as octal), optional white space, one unit (none: kB)
_MEMORY_SETTING = re.compile(rf"([1-9][0-9]{{0,18}})[{_ASCII_SPACE}]*(B|kB|MB|GB|TB)?", re.ASCII)
_KB_PER_UNIT = {"B": 1 / 1024, "kB": 1, "MB": 1024, "GB": 1024**2, "TB": 1024**3}
#: the server's bounds of ``maintenance_work_mem``, in kB
MAINTENANCE_WORK_MEM_KB = (1024, 2_147_483_647)


def check_memory_setting(value: Any, name: str) -> str:
    """Return a ``maintenance_work_mem`` such as ``"256MB"`` as given, or refuse it.

    The server would refuse a bad one too, but only at the statement that sets it: after the
    load. What passes is read by the server as written: decimal ASCII digits, one unit (B, kB,
    MB, GB, TB, case as written; none: kB), from 1 MB up to (not including) 2 TB.
    """
    found = _MEMORY_SETTING.fullmatch(value.strip(_ASCII_SPACE)) if isinstance(value, str) else None
    low, high = MAINTENANCE_WORK_MEM_KB
    if found is None or not low <= int(found[1]) * _KB_PER_UNIT[found[2] or "kB"] <= high:
        raise ValueError(
            f"{name} must be a PostgreSQL memory setting from 1MB to under 2TB such as '256MB' or "
            f"'1GB' (a whole number without leading zeros; units B, kB, MB, GB, TB, case as "
            f"written), got {value!r}"
        )
    return value


def default_load_id(dag_id: str, table: str, when: Any) -> str:
    """``dag_id/table/logical date`` (run id when there is no logical date).

    The same key as the bulk-mode lease, stable across a re-run of the same DAG run.
    """
    return LeaseKey.of(dag_id, table, when).describe()
