"""Bulk mode: server-wide settings raised for a load and always put back, with leases.

Which module to open:

- :mod:`~airflow_bulkload.bulk_mode.target` — :class:`BulkModeTarget`, which server (RDS/Aurora
  instance and/or cluster, or a self-managed one): one value for every task that needs it;
- :mod:`~airflow_bulkload.bulk_mode.policy` — the pure rules: default settings per engine, what is
  refused, leases and their expiry, tag encoding;
- :mod:`~airflow_bulkload.bulk_mode.status` — what to wait for after a change, and the one poll
  routine the synchronous wait and the deferrable trigger share;
- :mod:`~airflow_bulkload.bulk_mode.parameter_groups` — RDS parameter groups (DB and DB cluster):
  values, batches, and the tags that hold the state;
- :mod:`~airflow_bulkload.bulk_mode.instance` — an instance's DB parameter group
  (modify-in-place or swap);
- :mod:`~airflow_bulkload.bulk_mode.cluster` — an Aurora cluster's DB cluster parameter group;
- :mod:`~airflow_bulkload.bulk_mode.rds` — :class:`RdsBulkModeBackend`, both parts together.

The self-managed backend (``ALTER SYSTEM`` / ``SET GLOBAL``) and the Airflow hook that picks a
backend live in :mod:`airflow_bulkload.hooks.bulk_mode`.
"""

from airflow_bulkload.bulk_mode.target import BulkModeTarget

__all__ = ["BulkModeTarget"]
