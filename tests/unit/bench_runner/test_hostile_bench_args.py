"""Hostile: ``benchmarks/run.py --pipeline-arg NAME=VALUE`` (unit level, no benchmark runs).

What ``parse_args`` accepts goes, as ``NAME=repr(VALUE)``, into the pipeline cases' DAG file
(``cases._pipeline`` renders ``PIPELINE_DAG``), which the bench only imports after generating the
data and starting moto, a scheduler and the workers; a mistake shows then as a failed DAG run with
diagnostics. So: whatever the command line accepts must give a DAG that builds, for both pipeline
cases; and what the output says the pipeline ran with must be what it ran with.
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks import cases
from benchmarks.run import parse_args, parse_pipeline_arg


class _Rendered(Exception):
    def __init__(self, source: str) -> None:
        super().__init__("rendered")
        self.source = source


def rendered_dag(args: argparse.Namespace, *, staged: bool) -> str:
    """The DAG file ``cases._pipeline`` writes for these arguments (its own code, stand-ins for
    the database, the table and the cluster)."""

    def run(dag_id: str, source: str, *_: Any) -> Any:
        raise _Rendered(source)

    bench = SimpleNamespace(
        engine=SimpleNamespace(name="postgres", create_table=lambda *a, **k: None),
        dataset=None,
        rows=1000,
        source=SimpleNamespace(uri="s3://bench-input/x/"),
        parallel=2,
        bulk_mode=args.bulk_mode,
        chunk_size=args.chunk_size,
        pipeline_args=dict(args.pipeline_args),  # as run.prepare builds it
        cluster=SimpleNamespace(run=run),
    )
    db = SimpleNamespace(name="bl_bench_x", conn_id="bl_conn_x", airflow_conn="{}")
    with pytest.raises(_Rendered) as rendered:
        cases._pipeline(bench, db, staged=staged)  # type: ignore[arg-type]
    return rendered.value.source


def build(source: str) -> None:
    """Import the DAG file as the scheduler would (in this process)."""
    exec(compile(source, "bench_dag.py", "exec"), {"__name__": "bench_dag"})


def accepted(argv: list[str]) -> argparse.Namespace | None:
    try:
        return parse_args(["--engine", "postgres", *argv])
    except SystemExit:
        return None


# -- handled ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    ["x=foo", "x=", "x=__import__('os')", "x=(1,)*3", "x=open('f')", "x=[i for i in ()]"],
)
def test_a_value_that_is_not_a_literal_is_refused_naming_it(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="is not a Python literal"):
        parse_pipeline_arg(text)


@pytest.mark.parametrize("text", ["=1", " x=1", "x =1", "x y=1", "1x=1", "x.y=1", "x-y=1", "x\n=1"])
def test_a_name_that_is_not_an_identifier_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected NAME=VALUE"):
        parse_pipeline_arg(text)


@pytest.mark.parametrize(
    "text",
    [
        "sort_by_primary_key=False",
        "finalize_kwargs={'maintenance_work_mem': '256MB', 'parallelism': 1}",
        "stage_kwargs={'queue': 'x=y'}",
        "quoted_newlines= True",
        "stage_kwargs={'doc_md': 'costs {dag_id} {{x}}'}",  # braces: not format fields again
    ],
)
def test_plain_arguments_give_a_dag_that_builds(text: str) -> None:
    args = accepted(["--pipeline-arg", text])
    assert args is not None
    for staged in (False, True):
        build(rendered_dag(args, staged=staged))


# -- breaks -------------------------------------------------------------------------------------------
BENCH_OWN = [
    ["--pipeline-arg", "table='public.other'"],
    ["--pipeline-arg", "conn_id='x'"],
    ["--pipeline-arg", "source='s3://x/'"],
    ["--pipeline-arg", "staging='s3://x/'"],
    ["--pipeline-arg", "file_format={'format': 'csv'}"],
    ["--pipeline-arg", "parallelism=4"],
    ["--pipeline-arg", "vcpus=4"],
    ["--pipeline-arg", "fail_on='error'"],
    ["--pipeline-arg", "bulk_mode='off'"],
    ["--pipeline-arg", "direct=True"],  # the pipeline_staged case sets direct=False
    ["--chunk-size", "64MB", "--pipeline-arg", "chunk_size='128MB'"],
]
KEYWORDS = [["--pipeline-arg", f"{kw}=1"] for kw in ("class", "lambda", "None", "True", "from")]
NOT_PARAMETERS = [["--pipeline-arg", "nonsense=1"], ["--pipeline-arg", "finalize_kwarg={}"]]
NOT_ROUND_TRIPPING = [
    # repr(float("inf")) is "inf": a name in the DAG file, not a literal
    ["--pipeline-arg", "stage_kwargs={'executor_config': {'limit': 1e999}}"],
    ["--pipeline-arg", "finalize_kwargs={'executor_config': {'floor': -1e400}}"],
]


@pytest.mark.parametrize(
    "argv",
    BENCH_OWN + KEYWORDS + NOT_PARAMETERS + NOT_ROUND_TRIPPING,
    ids=lambda argv: " ".join(argv).replace("--pipeline-arg ", ""),
)
def test_whatever_the_command_line_accepts_gives_a_dag_that_builds(argv: list[str]) -> None:
    """Fails now: each of these is accepted, and the pipeline cases' DAG file then fails to
    import (SyntaxError "keyword argument repeated" / "invalid syntax", TypeError "unexpected
    keyword argument", NameError "inf"): after the data is generated and the services started."""
    args = accepted(argv)
    if args is None:
        return  # refused on the command line: what we want
    for staged in (False, True):
        source = rendered_dag(args, staged=staged)
        try:
            build(source)
        except Exception as exc:
            call = source[source.index("bulk_load_table(") :].strip()
            pytest.fail(
                f"accepted {argv}, then the {'pipeline_staged' if staged else 'pipeline'} DAG "
                f"fails: {type(exc).__name__}: {exc}\n{call}"
            )


def test_a_name_given_twice_is_refused_not_half_reported() -> None:
    """Fails now: both are accepted; main() prints "pipeline with finalize_kwargs={...256MB...},
    finalize_kwargs={...1GB...}" while the DAG gets only the last (``dict(args.pipeline_args)``)."""
    args = accepted(
        [
            "--pipeline-arg",
            "finalize_kwargs={'maintenance_work_mem': '256MB'}",
            "--pipeline-arg",
            "finalize_kwargs={'maintenance_work_mem': '1GB'}",
        ]
    )
    assert args is None, f"accepted {args.pipeline_args}; the DAG gets {dict(args.pipeline_args)}"


def test_a_pathological_value_is_refused_as_a_usage_error_not_a_traceback() -> None:
    """Fails now: ``ast.literal_eval`` raises MemoryError (parser stack overflow), which argparse
    does not turn into a usage error, so the bench dies with a traceback."""
    text = "x=" + "-" * 50_000 + "1"
    with pytest.raises(SystemExit):
        parse_args(["--engine", "postgres", "--pipeline-arg", text])
