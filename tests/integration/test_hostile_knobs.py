"""Hostile: ``check_memory_setting`` against the real PostgreSQL server.

The check exists so that a ``maintenance_work_mem`` the server would refuse fails when the DAG is
built (or at finalize's validate), not at the first index build after the whole load. So whatever
it lets through, the server must take, and read as the number the value says (decimal, in the
unit given; no unit: kB), exactly as ``create_indexes`` sets it:
``SELECT pg_catalog.set_config('maintenance_work_mem', %s, false)``.

Session-level ``set_config`` only, on the admin database: no server-wide setting is changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_bulkload.knobs import check_memory_setting
from tests.harness import ServerSettings, _pg_admin

UNITS_IN_KB = {"B": 1 / 1024, "kB": 1, "MB": 1024, "GB": 1024**2, "TB": 1024**3}


def meant_kb(value: str) -> float:
    """What the value says, in kB, read the way a person reads it: decimal digits, one unit."""
    match = re.fullmatch(r"\s*([0-9]+)\s*(B|kB|MB|GB|TB)?\s*", value, flags=re.ASCII)
    assert match, f"test bug: {value!r}"
    return int(match.group(1), 10) * UNITS_IN_KB[match.group(2) or "kB"]


@pytest.fixture(scope="module")
def pg(pg_server: ServerSettings) -> Iterator[Any]:
    conn = _pg_admin(pg_server)
    try:
        yield conn
    finally:
        conn.close()


def server_reads(conn: Any, value: str) -> tuple[bool, Any]:
    """(accepted, setting in kB) for the value set as finalize sets it, in this session only."""
    try:
        conn.execute("SELECT pg_catalog.set_config('maintenance_work_mem', %s, false)", (value,))
    except Exception as exc:
        return False, str(exc).splitlines()[0]
    setting = conn.execute(
        "SELECT setting::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'"
    ).fetchone()[0]
    conn.execute("RESET maintenance_work_mem")
    return True, int(setting)


def passes_check(value: str) -> bool:
    try:
        check_memory_setting(value, "maintenance_work_mem")
    except ValueError:
        return False
    return True


#: values the check lets through, each proven on PostgreSQL 15 to be refused by the server (at
#: the first index build, after the load) or read as another number
PASS_THE_CHECK_BUT_NOT_THE_SERVER = [
    # below the server's minimum (1024 kB)
    "0",
    "1",
    "1023",
    "1kB",
    "64 kB",
    "1B",
    "1000B",
    # above the maximum (2147483647 kB)
    "2TB",
    "2048GB",
    "999999999999",
    "999999999999TB",
    # non-ASCII digits and spaces: Python's \d and \s match them, the server does not
    "\uff16\uff14MB",  # fullwidth 64
    "\u0666\u0664MB",  # Arabic-Indic 64
    "64\u00a0MB",
    "64MB\u2003",
    "\u2003 64MB",
    "64\x1cMB",
]

#: values the check lets through and the server reads as a different number: a leading 0 makes
#: the server read octal (strtol base 0), so the index builds get other memory than asked, silently
MISREAD_AS_OCTAL = ["065536", "01024MB", "0064MB", "0128MB"]

#: the check's own examples and other plain values: passed and read as written
CONTROLS = ["64MB", "1GB", "256 MB", "65536", "1024", "1048576B", "1TB", " 64MB ", "64\tMB"]


@pytest.mark.parametrize("value", CONTROLS)
def test_plain_values_pass_and_the_server_reads_them_as_written(pg: Any, value: str) -> None:
    assert passes_check(value)
    assert server_reads(pg, value) == (True, meant_kb(value))


@pytest.mark.parametrize("value", PASS_THE_CHECK_BUT_NOT_THE_SERVER + MISREAD_AS_OCTAL, ids=ascii)
def test_what_the_check_lets_through_the_server_takes_as_written(pg: Any, value: str) -> None:
    """Fails now: each of these passes the check, then is refused by the server (after the load)
    or silently read as another size."""
    accepted, setting = server_reads(pg, value)
    if passes_check(value):
        assert accepted, f"{value!r} passed the check, then the server refused it: {setting}"
        assert setting == meant_kb(value), (
            f"{value!r} passed the check as {meant_kb(value):.0f} kB; the server set {setting} kB"
        )
