"""Run TableStateHook.prepare or .finalize in a process of its own and SIGKILL it part-way.

Usage: python -m tests.integration.operators.table_child CONN_ID TABLE LOAD_ID ACTION KILL_AFTER
ACTION is ``prepare`` (killed after KILL_AFTER drops) or ``finalize`` (one build session; killed
after KILL_AFTER index builds). The kill comes from the process itself, at a known step.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from tests.harness import configure_process_environment

configure_process_environment()

from airflow_bulkload.hooks.table_state import TableStateHook  # noqa: E402


def main() -> None:
    conn_id, table, load_id, action, kill_after = sys.argv[1:6]
    limit = int(kill_after)
    done = 0
    hook = TableStateHook(conn_id=conn_id)
    dialect = hook.dialect

    def counted(original: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            nonlocal done
            result = original(*args, **kwargs)
            done += 1
            if done >= limit:
                print(f"KILLING after {done}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        return wrapper

    if action == "prepare":
        dialect.drop_index = counted(dialect.drop_index)  # type: ignore[method-assign]
        dialect.drop_foreign_key = counted(dialect.drop_foreign_key)  # type: ignore[method-assign]
        hook.prepare(
            table, load_id=load_id, drop_indexes=True, drop_primary_key=True, drop_foreign_keys=True
        )
    else:
        hook._build_in_own_session = counted(hook._build_in_own_session)  # type: ignore[method-assign]
        hook.finalize(table, load_id=load_id, parallelism=1)
    print("FINISHED", flush=True)


if __name__ == "__main__":
    main()
