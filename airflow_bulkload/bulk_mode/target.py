"""BulkModeTarget: which server bulk mode changes, as one value for every task that needs it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar


@dataclass(frozen=True)
class BulkModeTarget:
    """Where bulk mode applies: an RDS/Aurora instance and/or cluster, or a self-managed server.

    Give the enter and exit tasks (and the lease renewal) the same target. Every field may be a
    Jinja template (e.g. ``"{{ params.instance }}"``): the operator holding the target renders
    them, like its own template fields, just before it runs.

    :param db_instance_identifier: the RDS/Aurora DB instance (selects the RDS backend); on
        Aurora the writer, for instance-level parameters.
    :param db_cluster_identifier: the Aurora DB cluster, for cluster-level parameters (found only
        in the DB cluster parameter group; changed there in place, which needs a custom cluster
        parameter group no other cluster uses); selects the RDS backend.
    :param conn_id: ``postgres``/``mysql`` connection of a self-managed server, used when neither
        identifier is given. Its database holds the lease tables; point every pipeline on one
        server at the same database.
    :param aws_conn_id: AWS connection (RDS backend).
    :param region_name: AWS region, if not the connection's (RDS backend).
    """

    db_instance_identifier: str | None = None
    db_cluster_identifier: str | None = None
    conn_id: str | None = None
    aws_conn_id: str | None = "aws_default"
    region_name: str | None = None

    #: rendered by the operator that holds the target (see :meth:`render`)
    template_fields: ClassVar[tuple[str, ...]] = (
        "db_instance_identifier",
        "db_cluster_identifier",
        "conn_id",
        "aws_conn_id",
        "region_name",
    )

    @property
    def is_rds(self) -> bool:
        """Whether the RDS backend applies (an instance and/or a cluster is given)."""
        return bool(self.db_instance_identifier or self.db_cluster_identifier)

    def validate(self) -> BulkModeTarget:
        """Raise :class:`ValueError` unless the target names an instance, a cluster or a server."""
        if not self.conn_id and not self.is_rds:
            raise ValueError(
                "give db_instance_identifier and/or db_cluster_identifier (RDS/Aurora) or conn_id "
                "(own server)"
            )
        return self

    def describe(self) -> str | None:
        """The instance and/or cluster, else the connection, for messages."""
        parts = [self.db_instance_identifier or ""]
        if self.db_cluster_identifier:
            parts.append(f"cluster {self.db_cluster_identifier}")
        return " and ".join(p for p in parts if p) or self.conn_id

    def render(self, render_value: Callable[[Any], Any]) -> BulkModeTarget:
        """A copy with every set template field passed through ``render_value``."""
        rendered = {
            name: render_value(getattr(self, name))
            for name in self.template_fields
            if getattr(self, name)
        }
        return replace(self, **rendered)
