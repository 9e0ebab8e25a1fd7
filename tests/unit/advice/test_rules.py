"""One test (or a few) per rule, on synthetic inputs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_bulkload.advice import PreflightInputs, Severity, evaluate
from airflow_bulkload.advice import evidence as ev
from airflow_bulkload.advice.models import Finding, InputSummary
from airflow_bulkload.catalog import ServerFacts
from tests.unit.advice.factories import GB, MB, inputs, instance, staged, table


def findings(i: PreflightInputs, rule: str) -> list[Finding]:
    return [f for f in evaluate(i).findings if f.rule == rule]


def only(i: PreflightInputs, rule: str) -> Finding:
    found = findings(i, rule)
    assert len(found) == 1, [f.to_dict() for f in evaluate(i).findings]
    return found[0]


def test_clean_table_with_bigint_key_has_no_warnings() -> None:
    for engine in ("postgres", "mysql"):
        report = evaluate(inputs(engine, table(), vcpus=8))
        assert not report.by_severity(Severity.WARN, Severity.ERROR), report.format_table()


def test_every_finding_cites_a_source() -> None:
    t = table(
        pk={"a": "varchar(36)", "b": "int"},
        indexes={"i1": ["x"], "i2": ["y"], "i3": ["x", "y"]},
        fks=1,
        triggers=("audit",),
    )
    for engine in ("postgres", "mysql"):
        report = evaluate(inputs(engine, t, input=staged(5 * MB, 5 * MB, 2 * GB)))
        assert report.findings
        for finding in report.findings:
            assert finding.evidence, finding.rule
            assert all(e.source.id and e.effect for e in finding.evidence)


# -- primary key --------------------------------------------------------------------------------
def test_no_primary_key_on_mysql_warns_with_the_4x_measurement() -> None:
    finding = only(inputs("mysql", table(pk={})), "no_primary_key")
    assert finding.severity is Severity.WARN
    assert ev.NO_PRIMARY_KEY in finding.evidence
    assert "246 s" in ev.NO_PRIMARY_KEY.detail and "59 s" in ev.NO_PRIMARY_KEY.detail


def test_no_primary_key_but_unique_not_null_index_is_only_info_on_mysql() -> None:
    t = table(
        pk={}, columns={"code": "int"}, indexes={"uq": ["code"]}, unique=("uq",), not_null=("code",)
    )
    assert only(inputs("mysql", t), "no_primary_key").severity is Severity.INFO


def test_no_primary_key_on_postgres_is_info() -> None:
    assert only(inputs("postgres", table(pk={})), "no_primary_key").severity is Severity.INFO


@pytest.mark.parametrize(
    "kind", ["uuid", "varchar(36)", "character varying(36)", "char(32)", "binary(16)"]
)
def test_random_primary_key_types(kind: str) -> None:
    finding = only(inputs("mysql", table(pk={"id": kind})), "random_primary_key")
    assert finding.severity is Severity.WARN
    assert (
        ev.MD5_PRIMARY_KEY in finding.evidence and ev.RANDOM_PRIMARY_KEY_AURORA in finding.evidence
    )
    assert (
        only(inputs("postgres", table(pk={"id": kind})), "random_primary_key").severity
        is Severity.INFO
    )


@pytest.mark.parametrize(
    "kind", ["bigint", "int(11)", "bigint(20) unsigned", "integer", "smallint", "timestamp"]
)
def test_sequential_key_types_are_not_random(kind: str) -> None:
    assert not findings(inputs("mysql", table(pk={"id": kind})), "random_primary_key")


def test_hash_like_column_names_are_called_out() -> None:
    finding = only(inputs("mysql", table(pk={"md5_hash": "varchar(32)"})), "random_primary_key")
    assert "hash" in finding.message


def test_composite_primary_key_is_wide() -> None:
    t = table(pk={"tenant": "int", "id": "bigint"})
    assert only(inputs("mysql", t), "wide_primary_key").severity is Severity.WARN
    assert only(inputs("postgres", t), "wide_primary_key").severity is Severity.INFO
    assert not findings(inputs("mysql", t), "random_primary_key")


# -- input order --------------------------------------------------------------------------------
def test_unsorted_input_with_sort_off_warns_on_mysql() -> None:
    finding = only(inputs("mysql", table(), sort=False), "input_not_in_key_order")
    assert finding.severity is Severity.WARN
    assert ev.PK_ORDER in finding.evidence


def test_unsorted_input_is_fine_when_sort_is_auto_or_input_is_sorted() -> None:
    assert not findings(inputs("mysql", table()), "input_not_in_key_order")
    sorted_input = staged(200 * MB, sorted_by=("id",))
    assert not findings(
        inputs("mysql", table(), input=sorted_input, sort=False), "input_not_in_key_order"
    )


def test_unsorted_input_with_kept_indexes_is_info_citing_our_mariadb_measurement() -> None:
    t = table(indexes={"ix": ["payload"]}, size_bytes=50 * GB)
    finding = only(inputs("mysql", t, sort=False, drop_indexes=False), "input_not_in_key_order")
    assert finding.severity is Severity.INFO
    assert ev.PK_ORDER_MARIADB in finding.evidence


def test_input_order_is_not_judged_on_postgres() -> None:
    assert not findings(inputs("postgres", table(), sort=False), "input_not_in_key_order")


# -- secondary indexes --------------------------------------------------------------------------
def test_indexes_on_empty_table_are_dropped_by_the_plan() -> None:
    t = table(indexes={"a": ["x"], "b": ["y"], "c": ["z"]})
    report = evaluate(inputs("postgres", t))
    assert report.plan.drop_indexes
    finding = only(inputs("postgres", t), "secondary_indexes")
    assert finding.severity is Severity.INFO
    assert ev.SECONDARY_INDEXES in finding.evidence


def test_keeping_indexes_the_plan_would_drop_warns() -> None:
    t = table(indexes={"a": ["x"]})
    finding = only(inputs("mysql", t, drop_indexes=False), "secondary_indexes")
    assert finding.severity is Severity.WARN
    assert "+47 %" in ev.SECONDARY_INDEXES.effect


def test_small_load_into_large_table_keeps_indexes() -> None:
    t = table(indexes={"a": ["x"], "b": ["y"]}, size_bytes=100 * GB)
    i = inputs("postgres", t, input=staged(200 * MB))
    report = evaluate(i)
    assert not report.plan.drop_indexes
    # two indexes kept: ≈2x measured, so still a warning to prune
    assert only(i, "secondary_indexes").severity is Severity.WARN


def test_large_load_into_large_table_drops_indexes() -> None:
    t = table(indexes={"a": ["x"]}, size_bytes=10 * GB)
    assert evaluate(inputs("postgres", t, input=staged(*[500 * MB] * 12))).plan.drop_indexes


def test_redundant_prefix_index() -> None:
    t = table(indexes={"a": ["x"], "ab": ["x", "y"]})
    finding = only(inputs("mysql", t), "redundant_index")
    assert "a (x)" in finding.message and "ab" in finding.message


def test_index_that_is_a_prefix_of_the_primary_key_is_redundant() -> None:
    t = table(pk={"tenant": "int", "id": "bigint"}, indexes={"by_tenant": ["tenant"]})
    assert only(inputs("mysql", t), "redundant_index")


# -- foreign keys and triggers ------------------------------------------------------------------
def test_foreign_keys_cite_the_14_percent() -> None:
    for engine in ("mysql", "postgres"):
        finding = only(inputs(engine, table(fks=2)), "foreign_keys")
        assert finding.severity is Severity.WARN
        assert ev.INTEGRITY_CHECKS in finding.evidence
    assert "617 s" in ev.INTEGRITY_CHECKS.detail and "529 s" in ev.INTEGRITY_CHECKS.detail
    assert (
        "keeps foreign_key_checks on" in only(inputs("mysql", table(fks=1)), "foreign_keys").message
    )


def test_triggers_warn_unless_disabled() -> None:
    finding = only(inputs("postgres", table(triggers=("audit",))), "triggers")
    assert finding.severity is Severity.WARN
    assert finding.evidence[0].kind == "inferred"
    disabled = table(triggers=("audit",), extra={"disabled_triggers": ["audit"]})
    assert not findings(inputs("postgres", disabled), "triggers")


# -- chunk sizes --------------------------------------------------------------------------------
def test_many_small_chunks_warn() -> None:
    finding = only(inputs("mysql", input=staged(*[5 * MB] * 100)), "chunk_size")
    assert finding.severity is Severity.WARN
    assert "100 of 100" not in finding.message and "99 of 100" in finding.message
    assert ev.FILE_SIZE in finding.evidence


def test_small_last_chunk_and_small_total_are_fine() -> None:
    assert not findings(inputs("mysql", input=staged(300 * MB, 300 * MB, 1 * MB)), "chunk_size")
    assert not findings(inputs("mysql", input=staged(20 * MB)), "chunk_size")


def test_chunks_over_one_gigabyte_warn() -> None:
    finding = only(inputs("mysql", input=staged(3 * GB, 200 * MB)), "chunk_size")
    assert "over 1 GB" in finding.message


def test_chunk_size_option_outside_bounds_warns() -> None:
    assert only(inputs("postgres", chunk_size=10 * MB), "chunk_size").severity is Severity.WARN
    assert not findings(inputs("postgres", chunk_size=256 * MB), "chunk_size")


# -- parallelism --------------------------------------------------------------------------------
def test_parallelism_above_mysql_optimum_warns() -> None:
    finding = only(inputs("mysql", vcpus=16, parallelism=16), "parallelism")
    assert finding.severity is Severity.WARN
    assert "(10," in finding.message
    assert ev.PARALLEL_MYSQL in finding.evidence


def test_parallelism_above_postgres_optimum_warns() -> None:
    finding = only(inputs("postgres", vcpus=8, parallelism=8), "parallelism")
    assert "(7," in finding.message
    assert ev.PARALLEL_POSTGRES in finding.evidence
    assert not findings(inputs("postgres", vcpus=8, parallelism=7), "parallelism")


def test_unknown_vcpus_is_info() -> None:
    assert only(inputs("postgres"), "parallelism").severity is Severity.INFO


def test_more_workers_than_chunks_is_info() -> None:
    found = findings(
        inputs("postgres", vcpus=16, parallelism=8, input=staged(300 * MB, 300 * MB)), "parallelism"
    )
    assert [f.severity for f in found] == [Severity.INFO]


def test_vcpus_come_from_the_instance() -> None:
    i = inputs("postgres", instance=instance(vcpus=4), parallelism=8)
    assert "(3," in only(i, "parallelism").message


# -- storage ------------------------------------------------------------------------------------
def test_small_gp2_volume_warns_with_baseline_and_burst() -> None:
    i = inputs(
        "postgres", instance=instance(storage_type="gp2", allocated_gb=20, iops=None), vcpus=4
    )
    finding = only(i, "storage_iops")
    assert finding.severity is Severity.WARN
    assert "100 baseline IOPS" in finding.message and "burst" in finding.message
    assert "gp3" in finding.fix and "io1" in finding.fix
    assert ev.GP2_IOPS in finding.evidence


def test_large_gp2_volume_is_fine_for_one_stream() -> None:
    i = inputs(
        "postgres",
        instance=instance(storage_type="gp2", allocated_gb=1000, iops=None),
        parallelism=1,
    )
    assert not findings(i, "storage_iops")


def test_small_load_on_small_gp2_is_info() -> None:
    i = inputs(
        "postgres",
        input=staged(50 * MB),
        instance=instance(storage_type="gp2", allocated_gb=20, iops=None),
    )
    assert only(i, "storage_iops").severity is Severity.INFO


def test_aurora_storage_is_not_judged() -> None:
    i = inputs(
        "mysql", instance=instance(engine="aurora-mysql", storage_type="aurora", allocated_gb=1)
    )
    assert not findings(i, "storage_iops")


# -- maintenance window -------------------------------------------------------------------------
def test_load_overlapping_the_maintenance_window_warns() -> None:
    sunday_0445 = datetime(2024, 6, 2, 4, 45, tzinfo=UTC)
    assert sunday_0445.strftime("%a") == "Sun"
    i = inputs(
        "postgres",
        instance=instance(),
        load_start=sunday_0445,
        expected_duration=timedelta(hours=1),
    )
    finding = only(i, "maintenance_window")
    assert "sun:05:00-sun:05:30" in finding.message
    assert ev.MAINTENANCE_WINDOW in finding.evidence


def test_load_outside_the_window_is_fine() -> None:
    i = inputs("postgres", instance=instance(), load_start=datetime(2024, 6, 3, 12, 0, tzinfo=UTC))
    assert not findings(i, "maintenance_window")


# -- parameter groups and server settings -------------------------------------------------------
def test_default_parameter_group_warns() -> None:
    i = inputs("postgres", instance=instance(parameter_groups=("default.postgres16",)))
    finding = only(i, "default_parameter_group")
    assert finding.severity is Severity.WARN
    assert "copy-db-parameter-group" in finding.fix
    assert ev.BULK_PARAMETERS in finding.evidence


def test_default_cluster_parameter_group_warns_on_aurora() -> None:
    i = inputs(
        "mysql",
        instance=instance(engine="aurora-mysql", cluster_parameter_group="default.aurora-mysql8.0"),
    )
    assert "(cluster)" in only(i, "default_parameter_group").message


def test_local_infile_off_is_an_error_for_the_client_method() -> None:
    server = ServerFacts("mysql", local_infile=False)
    assert only(inputs("mysql", server=server), "local_infile").severity is Severity.ERROR
    assert not findings(inputs("mysql", server=server, method="aurora_s3"), "local_infile")
    assert not findings(
        inputs("mysql", server=ServerFacts("mysql", local_infile=True)), "local_infile"
    )


def test_missing_aws_s3_extension_is_an_error_for_rds_s3() -> None:
    server = ServerFacts("postgres", aws_s3_installed=False, aws_s3_available=True)
    finding = only(inputs("postgres", server=server, method="rds_s3"), "aws_s3_extension")
    assert finding.severity is Severity.ERROR
    assert "CREATE EXTENSION aws_s3" in finding.fix
    unavailable = ServerFacts("postgres", aws_s3_installed=False, aws_s3_available=False)
    assert (
        "method='client'"
        in only(inputs("postgres", server=unavailable, method="rds_s3"), "aws_s3_extension").fix
    )
    assert not findings(inputs("postgres", server=server), "aws_s3_extension")


def test_rds_s3_without_an_s3import_role_is_an_error() -> None:
    i = inputs("postgres", instance=instance(s3_import_roles=()), method="rds_s3")
    assert only(i, "s3_role").severity is Severity.ERROR


def test_aurora_s3_without_a_role_is_an_error() -> None:
    aurora = instance(engine="aurora-mysql", cluster_identifier="c1", s3_import_roles=())
    assert (
        only(inputs("mysql", instance=aurora, method="aurora_s3"), "s3_role").severity
        is Severity.ERROR
    )
    with_role = instance(
        engine="aurora-mysql", s3_role_parameters={"aws_default_s3_role": "arn:aws:iam::1:role/r"}
    )
    assert not findings(inputs("mysql", instance=with_role, method="aurora_s3"), "s3_role")
    server_role = ServerFacts("mysql", s3_role="arn:aws:iam::1:role/r")
    assert not findings(
        inputs("mysql", instance=aurora, server=server_role, method="aurora_s3"), "s3_role"
    )


def test_aurora_s3_on_a_non_aurora_instance_is_an_error() -> None:
    i = inputs("mysql", instance=instance(engine="mysql"), method="aurora_s3")
    assert "only on Aurora" in only(i, "s3_role").message


# -- anti-patterns already in place -------------------------------------------------------------
def test_unlogged_table_and_doublewrite_off_are_flagged() -> None:
    unlogged = table(extra={"persistence": "unlogged"})
    assert only(inputs("postgres", unlogged), "unlogged_table").severity is Severity.WARN
    server = ServerFacts("mysql", innodb_doublewrite=False)
    assert only(inputs("mysql", server=server), "doublewrite_off").severity is Severity.WARN


def test_ignore_rules_drops_findings() -> None:
    report = evaluate(inputs("mysql", table(pk={})), ignore_rules=["no_primary_key"])
    assert "no_primary_key" not in report.rules()


def _with_columns(engine: str, *names: str, extra: dict | None = None) -> PreflightInputs:
    from dataclasses import replace

    t = table(columns={"first": "text", "last": "text"}, not_null=("last",), extra=extra)
    return inputs(engine, t, input=replace(staged(100 * MB), columns=names))


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_input_columns_matching_the_table_pass(engine: str) -> None:
    assert findings(_with_columns(engine, "id", "last", "first"), "input_columns") == []


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_a_header_in_another_case_is_an_error_naming_the_table_column(engine: str) -> None:
    found = findings(_with_columns(engine, "ID", "First", "Last"), "input_columns")
    assert all(f.severity is Severity.ERROR for f in found)
    assert "'First' (the table has 'first'" in found[0].message


def test_an_extra_input_column_is_an_error() -> None:
    finding = only(_with_columns("postgres", "id", "first", "last", "nickname"), "input_columns")
    assert "'nickname'" in finding.message


def test_a_required_column_missing_from_the_input_is_an_error() -> None:
    finding = only(_with_columns("mysql", "id", "first"), "input_columns")
    assert "requires column(s) last" in finding.message


def test_identity_and_generated_columns_need_not_be_in_the_input() -> None:
    i = _with_columns("postgres", "first", "last", extra={"identity_columns": {"id": "always"}})
    assert findings(i, "input_columns") == []
    generated = _with_columns("mysql", "id", "first", "last", extra={"generated_columns": ["last"]})
    assert "generated column(s) last" in only(generated, "input_columns").message


def test_a_loader_that_may_not_checkpoint_is_warned() -> None:
    i = inputs("postgres", server=ServerFacts("postgres", can_checkpoint=False))
    assert only(i, "checkpoint_privilege").severity is Severity.WARN
    assert (
        findings(
            inputs("postgres", server=ServerFacts("postgres", can_checkpoint=True)),
            "checkpoint_privilege",
        )
        == []
    )


def test_load_mode_suggests_replace_for_a_snapshot_and_warns_of_a_small_replace() -> None:
    big = table(rows=1000, size_bytes=GB)
    snapshot = only(inputs("postgres", big, input=staged(GB)), "load_mode")
    assert snapshot.severity == Severity.INFO and "mode='replace'" in snapshot.fix
    increment = InputSummary(total_bytes=MB, total_rows=50)
    small = only(inputs("mysql", big, input=increment, mode="replace"), "load_mode")
    assert small.severity == Severity.WARN and "upsert" in small.fix
    assert not findings(inputs("mysql", big, input=increment), "load_mode")
    empty = only(inputs("postgres", table(), input=increment, mode="upsert"), "load_mode")
    assert "append" in empty.fix
