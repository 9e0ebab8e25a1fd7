"""Operator arguments as templates render them: the memory setting check."""

from __future__ import annotations

import pytest

from airflow_bulkload.knobs import check_memory_setting


@pytest.mark.parametrize("value", ["1GB", "64MB", "256 MB", "65536", "2048kB", "1TB", "1048576B"])
def test_memory_settings_the_server_takes_pass_as_given(value: str) -> None:
    assert check_memory_setting(value, "maintenance_work_mem") == value


@pytest.mark.parametrize(
    "value",
    [
        *("", "1gb", "64mb", "1.5GB", "-1", "1GiB", "1GB; RESET ALL", "GB", "1 GB 2", 1024, None),
        # below the server's 1 MB, above its 2 TB, octal to the server, digits it does not read
        *("512kB", "8192B", "0", "2048GB", "065536", "0064MB", "\uff16\uff14MB", "64\u00a0MB"),
    ],
)
def test_anything_else_is_refused_before_the_load(value: object) -> None:
    with pytest.raises(ValueError, match="maintenance_work_mem must be a PostgreSQL memory"):
        check_memory_setting(value, "maintenance_work_mem")  # type: ignore[arg-type]
