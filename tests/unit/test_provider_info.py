from __future__ import annotations

from importlib.metadata import entry_points, version

import airflow_bulkload


def test_provider_info_names_the_distribution() -> None:
    info = airflow_bulkload.get_provider_info()
    assert info["package-name"] == "airflow-bulkload"
    assert info["versions"][0] == airflow_bulkload.__version__ == version("airflow-bulkload")


def test_provider_entry_point_is_registered() -> None:
    names = {ep.value for ep in entry_points(group="apache_airflow_provider")}
    assert "airflow_bulkload.__init__:get_provider_info" in names


def test_every_listed_class_imports() -> None:
    from importlib import import_module

    info = airflow_bulkload.get_provider_info()
    paths = [c["hook-class-name"] for c in info.get("connection-types", [])]
    for section in ("operators", "hooks", "triggers"):
        for entry in info[section]:
            paths.extend(entry.get("python-modules", []))
    for path in paths:
        import_module(path)


def test_the_hooks_work_on_connection_types_that_exist() -> None:
    """No connection type of our own (no form to fill): the postgres and mysql providers' types."""
    from airflow.providers_manager import ProvidersManager

    from airflow_bulkload.hooks.bulk_load import BulkLoadHook
    from airflow_bulkload.hooks.bulk_mode import BulkModeHook

    registered = set(ProvidersManager().hooks)
    assert "connection-types" not in airflow_bulkload.get_provider_info()
    for hook in (BulkLoadHook, BulkModeHook):
        assert not hasattr(hook, "conn_type"), hook
        assert set(hook.supported_conn_types) <= registered, (hook, registered)


def test_the_integration_links_the_system_it_serves() -> None:
    """The UI's documentation link is the external system's page, not a made-up repository."""
    (integration,) = airflow_bulkload.get_provider_info()["integrations"]
    assert integration["external-doc-url"] == "https://aws.amazon.com/rds/"
