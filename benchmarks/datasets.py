"""Generated inputs for the demo and the benchmarks: deterministic, shuffled, written by DuckDB.

``classic``: five integer columns, the first the primary key (the shape the seeds measured).
``wide``: a bigint key, two integers, text and a timestamp (closer to a real ingest).
Both come with the DDL of a target table that has two secondary indexes.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb


@dataclass(frozen=True)
class Dataset:
    name: str
    columns: list[str]
    select_sql: str  # DuckDB SELECT over range(N) AS r(i); {seed} is filled in
    postgres_ddl: str  # {table} is filled in with a quoted name
    mysql_ddl: str
    index_columns: list[list[str]]


CLASSIC = Dataset(
    name="classic",
    columns=["id", "a", "b", "c", "d"],
    select_sql=(
        "SELECT i + 1 AS id, hash(i, 1) % 1000000 AS a, hash(i, 2) % 1000000 AS b, "
        "hash(i, 3) % 1000 AS c, hash(i, 4) % 100000000 AS d FROM range({rows}) r(i) "
        "ORDER BY hash(i, {seed})"
    ),
    postgres_ddl=(
        "CREATE TABLE {table} (id bigint PRIMARY KEY, a integer NOT NULL, b integer NOT NULL, "
        "c integer NOT NULL, d integer NOT NULL)"
    ),
    mysql_ddl=(
        "CREATE TABLE {table} (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL, b INT NOT NULL, "
        "c INT NOT NULL, d INT NOT NULL) ENGINE=InnoDB"
    ),
    index_columns=[["a"], ["b", "c"]],
)

WIDE = Dataset(
    name="wide",
    columns=["id", "customer_id", "quantity", "note", "created_at"],
    select_sql=(
        "SELECT i + 1 AS id, hash(i, 1) % 200000 AS customer_id, hash(i, 2) % 50 AS quantity, "
        "CASE WHEN i % 17 = 0 THEN NULL ELSE 'order ' || (i + 1) || ', note \"' || "
        "(hash(i, 5) % 9973) || '\"' END AS note, "
        "TIMESTAMP '2026-01-01' + to_seconds(hash(i, 3) % 31536000) AS created_at "
        "FROM range({rows}) r(i) ORDER BY hash(i, {seed})"
    ),
    postgres_ddl=(
        "CREATE TABLE {table} (id bigint PRIMARY KEY, customer_id integer NOT NULL, "
        "quantity integer NOT NULL, note text, created_at timestamp NOT NULL)"
    ),
    mysql_ddl=(
        "CREATE TABLE {table} (id BIGINT NOT NULL PRIMARY KEY, customer_id INT NOT NULL, "
        "quantity INT NOT NULL, note VARCHAR(255), created_at DATETIME NOT NULL) ENGINE=InnoDB"
    ),
    index_columns=[["customer_id"], ["created_at"]],
)

#: the classic rows in primary-key order, as a database export or Spark writes them: for
#: ``sort_by_primary_key="presorted"`` against the pipeline sorting them itself
CLASSIC_SORTED = replace(
    CLASSIC,
    name="classic_sorted",
    select_sql=CLASSIC.select_sql.replace("ORDER BY hash(i, {seed})", "ORDER BY i"),
)

DATASETS = {d.name: d for d in (CLASSIC, CLASSIC_SORTED, WIDE)}


def generate(
    dataset: Dataset,
    rows: int,
    out_dir: Path,
    *,
    files: int = 1,
    seed: int = 7,
    id_offset: int = 0,
) -> list[Path]:
    """Write ``rows`` shuffled rows as ``files`` CSV files (header, NULL as an empty field).

    ``id_offset`` shifts the primary key (ids ``id_offset + 1`` .. ``id_offset + rows``), so
    several inputs can go into one table."""
    out_dir.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = true")
    select = dataset.select_sql.format(rows=int(rows), seed=int(seed))
    if id_offset:
        select = f"SELECT * REPLACE (id + {int(id_offset)} AS id) FROM ({select})"  # noqa: S608
    paths: list[Path] = []
    per_file = -(-rows // files) if rows else 0
    for n in range(files):
        path = out_dir / f"{dataset.name}-{n:03d}.csv"
        # Only integers and our own constant SQL are formatted in; the path is quoted for DuckDB.
        part = f"SELECT * FROM ({select}) LIMIT {per_file} OFFSET {n * per_file}"  # noqa: S608
        target = str(path).replace("'", "''")
        con.execute(f"COPY ({part}) TO '{target}' (HEADER, DELIMITER ',', NULL '')")
        paths.append(path)
    con.close()
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="classic")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/data"))
    args = parser.parse_args()
    for path in generate(DATASETS[args.dataset], args.rows, args.out, files=args.files):
        print(path, path.stat().st_size)


if __name__ == "__main__":
    main()
