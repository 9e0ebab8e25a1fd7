"""WaitForInputSensor: wait until the input a staging task would read is there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context
from airflow.sdk.bases.sensor import BaseSensorOperator


class WaitForInputSensor(BaseSensorOperator):
    """Wait until ``source`` names input: what staging would read, listed the way it lists.

    Each S3 source must name at least one object: a prefix its own objects (not nested folders or
    folder markers), a glob its matches, an object itself, ``s3://b/day`` the folder ``day/``
    when no object has that name. ``mode="reschedule"`` (as ``bulk_load_table`` runs it) holds
    no worker slot between checks.

    :param source: as given to the staging task (templated): an S3 URI or a list of them.
    :param aws_conn_id: the AWS connection that reads the input.
    """

    template_fields: Sequence[str] = ("source",)
    ui_color = "#fff2cc"

    def __init__(
        self, *, source: str | list[str], aws_conn_id: str | None = "aws_default", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.aws_conn_id = aws_conn_id

    def poke(self, context: Context) -> bool:
        from airflow_bulkload.s3io import s3_client
        from airflow_bulkload.staging.sources import NoInputError, resolve_sources

        sources = [self.source] if isinstance(self.source, str) else list(self.source)
        if not all(s.startswith("s3://") for s in sources):
            raise ValueError(f"wait_for_input waits for S3 input, not local paths: {sources}")
        s3 = s3_client(self.aws_conn_id)
        for source in sources:
            try:
                found = resolve_sources(source, s3)
            except NoInputError as exc:
                self.log.info("no input yet: %s", exc)
                return False
            if not found:
                self.log.info("no input yet under %s", source)
                return False
        self.log.info("input is there: %s", ", ".join(sources))
        return True
