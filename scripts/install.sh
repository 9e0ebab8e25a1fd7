#!/usr/bin/env bash
# Creates .venv from the committed lock (requirements/lock.txt) with uv, installing uv and the
# system libraries mysqlclient builds against when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.8

if ! command -v mysql_config >/dev/null 2>&1 || ! command -v pkg-config >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "install: adding Debian packages default-libmysqlclient-dev, pkg-config (mysqlclient builds against them)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-libmysqlclient-dev pkg-config build-essential >/dev/null
    else
        echo "install: mysqlclient needs the MySQL client headers: install default-libmysqlclient-dev and pkg-config" >&2
        exit 1
    fi
fi

UV=$(command -v uv || true)
if [ -z "$UV" ] || [ "$("$UV" --version | awk '{print $2}')" != "$UV_VERSION" ]; then
    python3 -m venv .venv-uv
    .venv-uv/bin/python -m pip install -q "uv==$UV_VERSION"
    UV=.venv-uv/bin/uv
fi

[ -x .venv/bin/python ] || "$UV" venv -q --python 3.11 .venv
# Bytecode compiled once, here, as a deployment's image has it: where PYTHONDONTWRITEBYTECODE is
# set (this machine, many Docker images) and nothing was compiled, every Python process compiles
# each module it imports from source again, and an `airflow` command starts in about 4 s
# instead of 1.5 s (every task process and CLI call of the tests, the demo and the bench).
"$UV" pip sync -q --compile-bytecode --python .venv/bin/python requirements/lock.txt
"$UV" pip install -q --python .venv/bin/python --no-deps -e .
.venv/bin/python -m compileall -q -j 0 airflow_bulkload dags >/dev/null
touch .venv/.installed
echo "install: .venv ready ($(.venv/bin/python -c 'import airflow; print("Airflow", airflow.__version__)'))"
