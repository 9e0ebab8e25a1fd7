"""MySQL / Aurora MySQL: every piece of MySQL SQL text this provider sends lives in this package.

Written for MySQL 8.0 and Aurora MySQL 3 and tested on MariaDB 10.11 (our stand-in). Where the two
differ, the docstring of the function concerned says so.

One module per role of :class:`~airflow_bulkload.dialects.roles.Dialect`: :mod:`.session`
(names, transactions, the state tables of :mod:`.state`), :mod:`.ledger` (chunk ledger and load
records), :mod:`.load` (``LOAD DATA`` from a FIFO or S3, session tuning and load slots; described
there), :mod:`.catalog` (catalog reads), :mod:`.table_prep` (claims, saved state and the
drop/rebuild DDL) and :mod:`.settings` (bulk mode's server settings), :mod:`.work_tables` (the replace and upsert modes). Pure SQL text lives in
:mod:`.quoting` (the safety rules), :mod:`.load_sql` and :mod:`.ddl`; :mod:`.errors` turns load
warnings into errors.
"""

from __future__ import annotations

from airflow_bulkload.dialects.mysql.catalog import MySqlCatalog
from airflow_bulkload.dialects.mysql.ledger import MySqlLedger
from airflow_bulkload.dialects.mysql.load import MySqlLoader
from airflow_bulkload.dialects.mysql.session import MySqlSession
from airflow_bulkload.dialects.mysql.settings import MySqlSettings
from airflow_bulkload.dialects.mysql.table_prep import MySqlTablePrep
from airflow_bulkload.dialects.mysql.work_tables import MySqlWorkTables


class MySqlDialect(
    MySqlLedger,
    MySqlLoader,
    MySqlCatalog,
    MySqlTablePrep,
    MySqlWorkTables,
    MySqlSettings,
    MySqlSession,
):
    """MySQL 8.0 / Aurora MySQL 3 (and MariaDB 10.6+) over a MySQLdb connection.

    :param state_database: the database holding the ``bulkload_*`` state tables; default the
        connection's database. Created if missing when given explicitly.
    :param chunk_lock_timeout: seconds to wait for another loader of the same chunk.
    """


__all__ = ["MySqlDialect"]
