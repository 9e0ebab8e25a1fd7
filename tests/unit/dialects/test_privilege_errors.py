"""Each dialect tells the server's privilege refusals from other errors, so bulk mode explains
only those (a lost connection must stay what it is: a blip its retry finishes)."""

from __future__ import annotations

import MySQLdb
import pytest
from psycopg import errors as pg_errors

from airflow_bulkload.dialects import dialect_for


@pytest.mark.parametrize(
    ("error", "is_privilege"),
    [
        (pg_errors.InsufficientPrivilege("permission denied to set parameter"), True),
        (pg_errors.InsufficientPrivilege("permission denied for schema bulkload"), True),
        (pg_errors.AdminShutdown("terminating connection"), False),
        (pg_errors.UndefinedObject("unrecognized configuration parameter"), False),
        (RuntimeError("anything else"), False),
    ],
)
def test_postgres(error: BaseException, is_privilege: bool) -> None:
    assert dialect_for("postgres").is_privilege_error(error) is is_privilege


@pytest.mark.parametrize(
    ("error", "is_privilege"),
    [
        (MySQLdb.OperationalError(1227, "Access denied; you need SUPER"), True),
        (MySQLdb.OperationalError(1044, "Access denied for user to database"), True),
        (MySQLdb.OperationalError(1142, "INSERT command denied"), True),
        (MySQLdb.OperationalError(1143, "SELECT command denied for column"), True),
        (MySQLdb.OperationalError(1045, "Access denied (using password: NO)"), False),
        (MySQLdb.OperationalError(2013, "Lost connection to server during query"), False),
        (MySQLdb.OperationalError(1193, "Unknown system variable"), False),
        (RuntimeError("anything else"), False),
    ],
)
def test_mysql(error: BaseException, is_privilege: bool) -> None:
    assert dialect_for("mysql").is_privilege_error(error) is is_privilege
