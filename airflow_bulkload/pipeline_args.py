"""How ``bulk_load_table`` builds each task's arguments.

A DAG author's per-stage extras, the UI names of mapped tasks, and chained ``pre_execute`` hooks.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from airflow.sdk import Context

#: what per-stage arguments may not change: a task's identity and the pipeline's timing hooks
_RESERVED = frozenset(
    {"task_id", "table", "conn_id", "source", "staging", "chunk", "pre_execute", "post_execute"}
)


def with_extra(
    arguments: dict[str, Any], extra: dict[str, Any] | None, name: str
) -> dict[str, Any]:
    """The pipeline's arguments for a task, overridden by the author's ``extra``."""
    reserved = sorted(set(extra or {}) & _RESERVED)
    if reserved:
        raise ValueError(f"{name} may not set {reserved}: they are the pipeline's own")
    return arguments | dict(extra or {})


#: how the UI names a mapped load task: its chunk's object (and bytes, for a range)
CHUNK_MAP_INDEX = (
    "{{ task.chunk['uri'].rsplit('/', 1)[-1] }}"
    "{% if task.chunk.get('byte_range') %} bytes {{ task.chunk['byte_range'][0] }}-"
    "{{ task.chunk['byte_range'][1] }}{% endif %}"
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
    local = [s for s in sources if not s.startswith(("s3://", "{{"))]
    if local:
        raise ValueError(f"wait_for_input waits for S3 input, not local paths: {local}")
