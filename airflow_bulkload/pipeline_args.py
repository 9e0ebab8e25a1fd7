"""How ``bulk_load_table`` checks and builds each task's arguments.

The checks it can make when the DAG is parsed, a DAG author's per-stage extras, the UI names of
mapped tasks, and chained ``pre_execute`` hooks.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from airflow.sdk import Context, Param, XComArg

from airflow_bulkload.bulk_mode.policy import check_reboot_policy
from airflow_bulkload.hooks.bulk_load import LOAD_METHODS
from airflow_bulkload.knobs import check_bool, check_memory_setting, parse_parallelism
from airflow_bulkload.modes import MODES, parse_mode, parse_mode_arguments
from airflow_bulkload.staging.planning import parse_size_argument

AUTO = "auto"
BULK_MODES = (AUTO, "off")

#: what per-stage arguments may not change: a task's identity, what ties it to this load (its
#: load id, mode and input, and when it runs), and the pipeline's timing hooks
_RESERVED = frozenset(
    {
        *("task_id", "table", "conn_id", "source", "staging", "chunk", "manifest"),
        *("load_id", "mode", "upsert_keys", "trigger_rule", "pre_execute", "post_execute"),
    }
)


def with_extra(
    arguments: dict[str, Any], extra: dict[str, Any] | None, name: str
) -> dict[str, Any]:
    """The pipeline's arguments for a task, overridden by the author's ``extra``."""
    reserved = sorted(set(extra or {}) & _RESERVED)
    if reserved:
        raise ValueError(f"{name} may not set {reserved}: they are the pipeline's own")
    return arguments | dict(extra or {})


def renders_later(value: Any) -> bool:
    """Whether an argument is only known when its task runs (a Jinja template, an XCom)."""
    if isinstance(value, XComArg):
        return True
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def check_finalize_extra(extra: dict[str, Any] | None) -> None:
    """Refuse now the ``finalize_kwargs`` that finalize would refuse after the load.

    A templated field's template or XCom is left for finalize to check once rendered; ``analyze``
    and ``checkpoint`` are not templated, so they must be bools now.
    """
    templated: dict[str, Callable[[Any, str], Any]] = {
        "maintenance_work_mem": check_memory_setting,
        "parallelism": lambda value, name: parse_parallelism(value, 1, 1, name=name),
    }
    for key, value in (extra or {}).items():
        name = f"finalize_kwargs {key}"
        if key in ("analyze", "checkpoint"):
            check_bool(value, name)
        elif key in templated and not renders_later(value):
            templated[key](value, name)


#: how the UI names a mapped load task: its (batch's first) chunk's object, bytes for a range,
#: and how many more chunks its batch holds
CHUNK_MAP_INDEX = (
    "{% set first = task.chunk if task.chunk is mapping else task.chunk[0] %}"
    "{{ first['uri'].rsplit('/', 1)[-1] }}"
    "{% if first.get('byte_range') %} bytes {{ first['byte_range'][0] }}-"
    "{{ first['byte_range'][1] }}{% endif %}"
    "{% if task.chunk is not mapping and task.chunk | length > 1 %}"
    " +{{ task.chunk | length - 1 }} more{% endif %}"
)
#: how the UI names a mapped staging task: its group and first input file
GROUP_MAP_INDEX = (
    "group {{ task.group['index'] }}: {{ task.group['sources'][0]['location'].rsplit('/', 1)[-1] }}"
    "{% if task.group['sources'] | length > 1 %} +{{ task.group['sources'] | length - 1 }}"
    "{% endif %}"
)


def accepted_by(operator: type, extra: dict[str, Any] | None) -> dict[str, Any]:
    """The entries of ``extra`` that ``operator`` (or ``BaseOperator``) takes as arguments."""
    names: set[str] = set()
    for klass in operator.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            names |= set(inspect.signature(init).parameters)
    return {k: v for k, v in (extra or {}).items() if k in names}


def then(
    first: Callable[[Context], None], second: Callable[[Context], None]
) -> Callable[..., None]:
    """One ``pre_execute`` hook that runs two."""

    def both(context: Context) -> None:
        first(context)
        second(context)

    return both


def check_waitable(source: str | list[str]) -> None:
    """Refuse ``wait_for_input`` over local paths (a template is checked when it renders)."""
    sources = [source] if isinstance(source, str) else list(source)
    local = [s for s in sources if not (s.startswith("s3://") or renders_later(s))]
    if local:
        raise ValueError(f"wait_for_input waits for S3 input, not local paths: {local}")


def check_pipeline_arguments(
    *,
    method: str,
    bulk_mode: str | dict[str, Any],
    parallelism: int | str,
    drop_indexes: bool | str,
    drop_primary_key: bool | str,
    reboot_policy: str,
    mode: str,
    upsert_keys: list[str] | str | None,
    load_batch_size: str | int | None = None,
    chunk_size: str | int = "256MB",
    stage_group_size: str | int | None = None,
) -> None:
    """Refuse, when the DAG is parsed, arguments no run could use (``ValueError``).

    A value that renders later (a ``{{ ... }}`` or ``{% ... %}`` template, an XCom) is checked
    by its task once rendered.
    """
    if method not in LOAD_METHODS:
        raise ValueError(f"method must be one of {LOAD_METHODS}, got {method!r}")
    if isinstance(bulk_mode, str) and bulk_mode not in BULK_MODES:
        raise ValueError(
            f"bulk_mode must be 'auto', 'off' or a dict of settings, got {bulk_mode!r}"
        )
    if isinstance(parallelism, str) and parallelism != AUTO:
        raise ValueError(f"parallelism must be 'auto' or a positive int, got {parallelism!r}")
    if isinstance(parallelism, int) and parallelism < 1:
        raise ValueError(f"parallelism must be at least 1, got {parallelism}")
    for name, value in (("drop_indexes", drop_indexes), ("drop_primary_key", drop_primary_key)):
        if isinstance(value, str) and value != AUTO:
            raise ValueError(f"{name} must be 'auto', True or False, got {value!r}")
    for name, size in (
        ("load_batch_size", load_batch_size),  # None: one task per chunk
        ("chunk_size", chunk_size),
        ("stage_group_size", stage_group_size),  # None: one stage task
    ):
        if size is not None and not renders_later(size):
            parse_size_argument(size, name)
    if bulk_mode != "off" and not renders_later(reboot_policy):
        check_reboot_policy(reboot_policy)  # the operator checks again once rendered
    if not renders_later(mode):
        if renders_later(upsert_keys):
            parse_mode(mode)
        else:
            parse_mode_arguments(mode, upsert_keys)


def reload_param() -> Param:
    """The ``reload`` DAG Param the example DAGs expose, for ``reload="{{ params.reload }}"``.

    Off by default; "Trigger DAG w/ config" or a backfill turns it on to replace a date's rows.
    """
    return Param(
        False,
        type="boolean",
        description="Replace this date's rows: take back every row this DAG loaded for the date "
        "(by key) and load the input again, exactly once. Off: a date already loaded from a "
        "different input is refused; the same input is not loaded twice.",
    )


def mode_param(default: str = "append") -> Param:
    """A ``mode`` DAG Param (``mode="{{ params.mode }}"``): append, replace or upsert."""
    return Param(
        default,
        type="string",
        enum=list(MODES),
        description="append: add the input's rows. replace: the input becomes the table "
        "(swapped in at once when loaded). upsert: add new rows and replace those whose key is "
        "already in the table.",
    )
