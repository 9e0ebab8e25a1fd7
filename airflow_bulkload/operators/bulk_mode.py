"""EnterBulkModeOperator / ExitBulkModeOperator: a setup/teardown pair around a load.

::

    prod = BulkModeTarget(db_instance_identifier="prod-pg")
    enter = EnterBulkModeOperator(task_id="enter_bulk_mode", table="public.events", target=prod)
    exit_ = ExitBulkModeOperator(task_id="exit_bulk_mode", table="public.events", target=prod)
    enter.as_setup() >> load >> exit_.as_teardown(setups=enter)

The teardown runs whatever happened in between, and is safe when enter never ran or failed half-way.
Both tasks must get the same ``table`` and ``target``: the lease is keyed by (dag id, table, logical
date), so a re-run of the same DAG run re-claims its own lease.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import jinja2
from airflow.sdk import BaseOperator, Context, conf

from airflow_bulkload.bulk_mode.policy import (
    LeaseKey,
    check_reboot_policy,
    check_strategy,
)
from airflow_bulkload.bulk_mode.status import WaitSpec
from airflow_bulkload.bulk_mode.target import BulkModeTarget
from airflow_bulkload.exceptions import BulkModeStateError
from airflow_bulkload.hooks.bulk_mode import DEFAULT_LEASE_TTL, BulkModeHook
from airflow_bulkload.operators.undone_by_teardown import refuse_if_run_on
from airflow_bulkload.triggers.bulk_mode import RdsParameterGroupInSyncTrigger

log = logging.getLogger(__name__)


class _BulkModeOperator(BaseOperator):
    """Shared arguments; see :class:`EnterBulkModeOperator`."""

    template_fields: Sequence[str] = (
        "table",
        "target",
        "settings",
        "strategy",
        "reboot_policy",
    )
    ui_color = "#fde9c8"

    def __init__(
        self,
        *,
        table: str,
        target: BulkModeTarget,
        settings: dict[str, Any] | None = None,
        strategy: str = "auto",
        reboot_policy: str = "never",
        lease_ttl: timedelta = DEFAULT_LEASE_TTL,
        expected_load_duration: timedelta | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        waiter_delay: int = 30,
        waiter_max_attempts: int = 60,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.target = target
        self.settings = settings
        self.strategy = strategy
        self.reboot_policy = reboot_policy
        self.lease_ttl = lease_ttl
        self.expected_load_duration = expected_load_duration
        self.deferrable = deferrable
        self.waiter_delay = waiter_delay
        self.waiter_max_attempts = waiter_max_attempts

    def render_template(
        self,
        content: Any,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        seen_oids: set[int] | None = None,
    ) -> Any:
        """Render a :class:`BulkModeTarget` field by field into a new target (it is frozen)."""
        render = super().render_template
        if isinstance(content, BulkModeTarget):
            return content.render(lambda value: render(value, context, jinja_env, seen_oids))
        return render(content, context, jinja_env, seen_oids)

    def validate(self) -> None:
        """Check the arguments once templates are rendered (``execute`` calls it first).

        Raises :class:`ValueError` for a target that names nothing, an unknown ``strategy`` or
        ``reboot_policy``.
        """
        if not isinstance(self.target, BulkModeTarget):
            raise ValueError(f"target must be a BulkModeTarget, got {self.target!r}")
        self.target.validate()
        check_strategy(self.strategy)
        check_reboot_policy(self.reboot_policy)

    def hook(self) -> BulkModeHook:
        return BulkModeHook(
            self.target,
            settings=self.settings,
            strategy=self.strategy,
            reboot_policy=self.reboot_policy,
            expected_load_duration=self.expected_load_duration,
        )

    def lease_key(self, context: Context) -> LeaseKey:
        return lease_key_of(context, self.table)

    def _summary(self, key: LeaseKey, spec: WaitSpec | None) -> dict[str, Any]:
        return {
            "lease": key.token,
            "holder": key.describe(),
            "target": spec.target if spec else self.target.describe(),
            "parameter_group": spec.parameter_group if spec else None,
            "cluster_parameter_group": spec.cluster_parameter_group if spec else None,
        }

    def _wait(self, context: Context, spec: WaitSpec | None, key: LeaseKey) -> dict[str, Any]:
        if spec is None:
            return self._summary(key, None)
        if self.deferrable:
            self._defer(spec)
        hook = self.hook()
        hook.wait(spec, delay=self.waiter_delay, max_attempts=self.waiter_max_attempts)
        self.log.info("%s: parameter group %s in-sync", spec.target, spec.groups)
        return self._summary(key, spec)

    def _defer(self, spec: WaitSpec) -> None:
        self.defer(
            trigger=RdsParameterGroupInSyncTrigger(
                spec=spec.to_dict(),
                waiter_delay=self.waiter_delay,
                waiter_max_attempts=self.waiter_max_attempts,
                aws_conn_id=self.target.aws_conn_id,
                region_name=self.target.region_name,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.waiter_delay * self.waiter_max_attempts + 60),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after the trigger.

        Finish on ``ready``, reboot (if allowed) and defer again on ``pending-reboot``, fail with
        the reason otherwise.
        """
        spec = WaitSpec.from_dict(event["spec"])
        status = event.get("status")
        hook = self.hook()
        if status == "ready":
            hook.rds.finish(spec)
            self.log.info("%s: parameter group %s in-sync", spec.target, spec.groups)
            return self._summary(self.lease_key(context), spec)
        if status == "pending-reboot":
            self._defer(hook.rds.reboot(spec))
        raise BulkModeStateError(
            f"{spec.target}: waiting for {spec.groups} failed: {event.get('message', status)}"
        )


class EnterBulkModeOperator(_BulkModeOperator):
    """Put the server in bulk mode for one table's load.

    Take a lease, set the bulk values (RDS parameter group or self-managed server settings) and wait
    until they are in effect.

    Use it as a setup task, paired with :class:`ExitBulkModeOperator` as its teardown. Cleared to
    run again after that teardown has run in its DAG run ("only failed" after it failed), it
    fails without changing anything (:mod:`~airflow_bulkload.operators.undone_by_teardown`).

    :param table: the table being loaded; part of the lease key (dag id, table, logical date).
    :param target: which server: a :class:`~airflow_bulkload.bulk_mode.target.BulkModeTarget`
        naming the RDS/Aurora instance and/or cluster, or the connection of a self-managed
        server. Its fields are templated.
    :param settings: overrides of the default bulk settings; ``None`` as a value drops a default.
        PostgreSQL defaults: maintenance_work_mem 1 GB, max_wal_size 4 GB, checkpoint_timeout
        30 min. MySQL: dynamic only (innodb_io_capacity[_max]). Static ones (e.g.
        innodb_log_file_size) need ``reboot_policy='allowed'``; doublewrite off is always refused.
    :param strategy: RDS: ``auto`` (default: modify the instance's own custom group in place, else
        swap), ``modify-in-place`` or ``swap`` (associate a bulk copy of the group; needs reboots).
    :param reboot_policy: RDS: ``never`` (default) or ``allowed``.
    :param lease_ttl: how long the lease holds without renewal; after that another run's enter or
        exit may restore the settings.
    :param expected_load_duration: RDS: warn if the maintenance window falls within it.
    :param deferrable: wait for the RDS change in the triggerer instead of a worker slot.
    :param waiter_delay: seconds between checks while waiting.
    :param waiter_max_attempts: checks before giving up.
    """

    def execute(self, context: Context) -> dict[str, Any]:
        self.validate()
        refuse_if_run_on(self, context, "the server would stay in bulk mode after the run")
        key = self.lease_key(context)
        hook = self.hook()
        self.log.info("entering bulk mode for %s (lease %s)", key.describe(), key.token)
        spec = hook.enter(key, self.lease_ttl)
        return self._wait(context, spec, key)


class ExitBulkModeOperator(_BulkModeOperator):
    """Release the lease taken by :class:`EnterBulkModeOperator`; the last one restores the server.

    When it was the last live lease, put the original values back (RDS: recorded parameter values,
    or the original group after a swap, deleting the bulk copy) and wait until they are in effect.

    Safe as a teardown whatever happened before: when enter never ran, nothing is changed; when it
    failed half-way, what it changed is restored. Takes the same parameters as the enter operator,
    so one set of arguments can serve both.

    :param table: the table loaded; with the DAG id and logical date, the lease to release.
    :param target: the same :class:`~airflow_bulkload.bulk_mode.target.BulkModeTarget` as enter.
    :param settings: unused here (what enter changed is recorded with its lease).
    :param strategy: RDS: as for enter; a swap is undone by re-associating the original group.
    :param reboot_policy: RDS: ``never`` (default) or ``allowed``, as for enter.
    :param lease_ttl: unused here.
    :param expected_load_duration: unused here.
    :param deferrable: wait for the RDS change in the triggerer instead of a worker slot.
    :param waiter_delay: seconds between checks while waiting.
    :param waiter_max_attempts: checks before giving up.
    """

    ui_color = "#e3f1d4"

    def execute(self, context: Context) -> dict[str, Any]:
        self.validate()
        key = self.lease_key(context)
        hook = self.hook()
        self.log.info("leaving bulk mode for %s (lease %s)", key.describe(), key.token)
        spec = hook.exit(key)
        return self._wait(context, spec, key)


def lease_key_of(context: Context, table: str) -> LeaseKey:
    """The lease a run's bulk mode holds for ``table``: (dag id, table, logical date or run id)."""
    when = context.get("logical_date") or context["run_id"]
    return LeaseKey.of(context["dag"].dag_id, table, when)


class RenewBulkModeLease:
    """A ``pre_execute`` callable that renews the run's bulk-mode lease as a task starts.

    A lease expires so that a crashed run's settings are restored by the next run; a load that
    outlives the TTL must not lose its own lease meanwhile. The pipeline hangs this on every chunk
    load, so a lease lives as long as chunks keep starting. A failed renewal is logged, never
    fatal: the load itself does not depend on bulk mode.

    :param table: the table being loaded, as given to the enter and exit tasks.
    :param target: the bulk-mode target, as given to the enter and exit tasks.
    :param ttl: the lease's new time to live.
    """

    def __init__(
        self, *, table: str, target: BulkModeTarget, ttl: timedelta = DEFAULT_LEASE_TTL
    ) -> None:
        self.table = table
        self.target = target
        self.ttl = ttl

    def rendered(self, context: Context) -> tuple[LeaseKey, BulkModeTarget]:
        """The lease and the target with the templates rendered as the enter task rendered them.

        The pipeline passes the same (possibly templated) table and target to both.
        """
        task = context.get("task")

        def render(value: Any) -> Any:
            return task.render_template(value, context) if task is not None else value

        return lease_key_of(context, render(self.table)), self.target.render(render)

    def __call__(self, context: Context) -> None:
        key, target = self.rendered(context)
        try:
            renewed = BulkModeHook(target).renew(key, self.ttl)
        except Exception:
            log.warning("could not renew the bulk-mode lease of %s", key.describe(), exc_info=True)
            return
        if not renewed:
            log.warning(
                "bulk mode lease of %s is gone (expired and restored by another run?): this load "
                "continues with the server's normal settings",
                key.describe(),
            )
