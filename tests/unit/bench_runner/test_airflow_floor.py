"""The benchmark's airflow_floor case runs the pipeline's own task graph with no-op tasks."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_bulkload.pipeline import bulk_load_table
from benchmarks.cases import (
    AIRFLOW_FLOOR_DAG,
    FLOOR_AFTER_TASKS,
    FLOOR_SETUP_TASKS,
)


def floor_dag() -> DAG:
    source = AIRFLOW_FLOOR_DAG.format(
        dag_id="floor",
        chunks=8,
        parallel=2,
        setup=FLOOR_SETUP_TASKS,
        after=FLOOR_AFTER_TASKS,
    )
    namespace: dict[str, object] = {}
    exec(
        compile(source, "airflow_floor_dag.py", "exec"), namespace
    )  # the benchmark writes it as a file
    [dag] = [value for value in namespace.values() if isinstance(value, DAG)]
    return dag


def pipeline_dag() -> DAG:
    with DAG("p", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        bulk_load_table(
            table="public.t", conn_id="pg", source="s3://in/x/", staging="s3://s/x", parallelism=2
        )
    return dag


def edges(dag: DAG) -> set[tuple[str, str]]:
    def short(task_id: str) -> str:
        return task_id.rsplit(".", 1)[-1]  # without the pipeline's task group

    return {
        (short(task.task_id), short(down))
        for task in dag.tasks
        for down in task.downstream_task_ids
    }


def longest_chain(dag: DAG) -> int:
    """How many tasks the longest path through ``dag`` runs one after another."""
    memo: dict[str, int] = {}

    def depth(task_id: str) -> int:
        if task_id not in memo:
            downs = dag.get_task(task_id).downstream_task_ids
            memo[task_id] = 1 + max((depth(d) for d in downs), default=0)
        return memo[task_id]

    return max(depth(task.task_id) for task in dag.tasks)


def test_the_no_op_graph_has_the_pipelines_tasks_and_order() -> None:
    floor, pipeline = floor_dag(), pipeline_dag()
    assert {t.task_id for t in floor.tasks} == {
        t.task_id.rsplit(".", 1)[-1] for t in pipeline.tasks
    }
    # every ordering of the no-op graph is one the pipeline has (the pipeline adds a few more
    # edges between its setups and teardowns, which do not lengthen its critical path)
    assert edges(floor) <= edges(pipeline)
    # and its longest chain of tasks is the pipeline's: what Airflow costs on the critical path
    # (stage_group, mapped to nothing for an input below stage_group_size, is one of them)
    assert longest_chain(floor) == longest_chain(pipeline) == 8
    load = floor.get_task("load")
    assert load.partial_kwargs["max_active_tis_per_dagrun"] == 2  # type: ignore[attr-defined]


def test_the_no_op_graph_maps_as_many_load_tasks_as_the_pipeline_would() -> None:
    """PostgreSQL loads each gzip part as one chunk; MySQL stages ``chunk_size`` chunks, so a
    small MySQL input is one chunk and one load task, whatever its number of parts."""
    from types import SimpleNamespace

    from benchmarks.cases import pipeline_chunks

    def bench(engine: str, raw_bytes: int, chunk_size: str | None = None) -> object:
        source = SimpleNamespace(keys=[f"part-{i}" for i in range(8)], raw_bytes=raw_bytes)
        return SimpleNamespace(
            engine=SimpleNamespace(name=engine), source=source, chunk_size=chunk_size
        )

    assert pipeline_chunks(bench("postgres", 344_500_000)) == 8  # type: ignore[arg-type]
    assert pipeline_chunks(bench("mysql", 34_450_000)) == 1  # type: ignore[arg-type]
    assert pipeline_chunks(bench("mysql", 344_500_000)) == 2  # type: ignore[arg-type]
    assert pipeline_chunks(bench("mysql", 344_500_000, "64MB")) == 6  # type: ignore[arg-type]
