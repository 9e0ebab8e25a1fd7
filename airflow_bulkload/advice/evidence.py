"""The measured effects the pre-flight rules are based on, each with where it was measured.

Every finding cites one or more of these, so the DAG author can weigh the advice: a number measured
on a 16-vCPU Aurora instance is a hint for a 2-vCPU RDS instance, not a promise. ``kind`` says what
sort of support a rule has: ``measured`` (a benchmark number), ``guidance`` (the source's advice,
no number), ``requirement`` (the load cannot run otherwise) or ``inferred`` (no source measured this
case; the nearest measured effect is named).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

EvidenceKind = Literal["measured", "guidance", "requirement", "inferred"]


@dataclass(frozen=True)
class Source:
    """A document a measurement comes from (the seeds in ``shared/seeds`` and our own benchmarks)."""

    id: str
    title: str
    publisher: str


AURORA_LOAD = Source(
    "aurora-mysql-file-load-performance",
    "Improving file load performance in Amazon Aurora MySQL",
    "AWS Database Blog",
)
AURORA_BAD_PK = Source(
    "aurora-bad-primary-key-write-latency",
    "Making Aurora Write Latency 15x Higher (or More!) by Choosing a Bad Primary Key",
    "Percona",
)
PK_ORDER_INDEXES = Source(
    "load-data-infile-pk-order-and-indexes",
    "LOAD DATA INFILE (and mysqldump): PK order and dropping indexes",
    "Steffen Mueller (blog)",
)
RDS_PG_BULK = Source(
    "rds-postgresql-optimized-bulk-loading",
    "Optimized bulk loading in Amazon RDS for PostgreSQL",
    "AWS Database Blog",
)
INNODB_TUNING = Source(
    "innodb-bulk-insert-tuning",
    "Optimizing Innodb for Bulk Insert",
    "blog post and its comments",
)
PROJECT_BENCH = Source(
    "design-measured-hints",
    "DESIGN.md, 'Measured hints' (5 M rows, 2 cores, real servers)",
    "airflow-bulkload",
)
PIPELINE_BENCH = Source(
    "performance-two-vcpus",
    "docs/performance.md (10 M rows from S3, the pipeline under a real scheduler, 2 cores)",
    "airflow-bulkload",
)
AUTOINC_LOCK_TEST = Source(
    "autoinc-lock-mode-test",
    "tests/integration/dialects/test_mysql.py (MariaDB 10.11, innodb_autoinc_lock_mode 1)",
    "airflow-bulkload",
)
AWS_AURORA_S3_DOC = Source(
    "aws-docs-aurora-mysql-load-from-s3",
    "Loading data into an Aurora MySQL DB cluster from text files in an Amazon S3 bucket",
    "AWS documentation",
)
AWS_EBS_DOC = Source(
    "aws-docs-rds-storage",
    "Amazon RDS DB instance storage (gp2/gp3/io1 IOPS)",
    "AWS documentation",
)


@dataclass(frozen=True)
class Evidence:
    """One effect and where it was measured (or stated)."""

    kind: EvidenceKind
    effect: str
    detail: str
    source: Source

    def cite(self) -> str:
        return f"{self.effect} [{self.source.id}]"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evidence:
        return cls(
            kind=data["kind"],
            effect=data["effect"],
            detail=data["detail"],
            source=Source(**data["source"]),
        )


NO_PRIMARY_KEY = Evidence(
    "measured",
    "≈4x slower without a primary key (10 parallel threads)",
    "20 M rows, 10-thread LOAD DATA FROM S3, Aurora MySQL db.r6g.4xlarge (16 vCPU): 246 s without "
    "a PK vs 59 s with one; the wait event was index_tree_rw_lock (InnoDB's generated hidden key)",
    AURORA_LOAD,
)
MD5_PRIMARY_KEY = Evidence(
    "measured",
    "≈30 % slower with a VARCHAR hash key than with a sequential integer",
    "import into a table keyed by a sequential integer was almost 30 % faster than into one keyed "
    "by a VARCHAR MD5 hash (wider key, inserts at random points of the clustered index)",
    AURORA_LOAD,
)
RANDOM_PRIMARY_KEY_AURORA = Evidence(
    "measured",
    "up to ≈15x write latency with random keys once the table outgrows memory",
    "Aurora MySQL db.r5.2xlarge, 15 sysbench threads: ≈124 µs per insert with an AUTO_INCREMENT key, "
    "≈15x that with a random VARCHAR(26) key once data exceeded the buffer pool; the random-keyed "
    "table was 2.2x as large on disk (177.6 GB vs 79.3 GB for fewer rows)",
    AURORA_BAD_PK,
)
WIDE_PRIMARY_KEY = Evidence(
    "guidance",
    "composite or wide keys lower rows per 16 KB page, and every secondary index repeats the key",
    "'for a better performance always prefer integers with linearly increasing values for primary "
    "keys. Try to avoid random values or composite primary keys'",
    AURORA_LOAD,
)
PK_ORDER = Evidence(
    "measured",
    "≈20 % faster when the input is in primary-key order",
    "Aurora MySQL, 20 M rows: with a PK, ordering the file by the PK improved load speed by another "
    "20 % (PK + order together: ≈1/6 of the time without PK in random order)",
    AURORA_LOAD,
)
PK_ORDER_LARGE = Evidence(
    "measured",
    "PK order matters more as data grows: 4 % at 100 k rows, up to 45 % at 20 M rows",
    "MySQL 5.1 InnoDB, 5 integer columns, 2 secondary indexes: 20 M rows in 389.9 s random order vs "
    "278.2 s PK order (indexes kept); 257.3 s vs 141.5 s with indexes dropped and re-added",
    PK_ORDER_INDEXES,
)
PK_ORDER_MARIADB = Evidence(
    "measured",
    "sorting barely helps MariaDB while secondary indexes are kept (they dominate)",
    "5 M rows, 2 cores, MariaDB 10.11",
    PROJECT_BENCH,
)
SECONDARY_INDEXES = Evidence(
    "measured",
    "+47 % load time with one secondary index, ≈2x with two",
    "Aurora MySQL db.r6g.4xlarge, same data loaded with 0, 1, 2, ... secondary indexes",
    AURORA_LOAD,
)
DROP_INDEXES_MYSQL = Evidence(
    "measured",
    "dropping two indexes and re-adding them after the load halved a 20 M-row load",
    "MySQL InnoDB, empty table, 2 secondary indexes, PK order: 141.5 s with drop/re-add (index "
    "rebuild included) vs 278.2 s keeping them; 17 % faster at 100 k rows",
    PK_ORDER_INDEXES,
)
DROP_INDEXES_POSTGRES = Evidence(
    "measured",
    "index builds dominate an optimised PostgreSQL load; drop + parallel rebuild gave 6-7x",
    "5 M rows, 2 cores, PostgreSQL 15: index builds ≈5.5 s of ≈8 s; dropping all indexes incl. the PK "
    "and rebuilding them in parallel sessions was 6-7x faster than a naive COPY into the indexed table",
    PROJECT_BENCH,
)
INTEGRITY_CHECKS = Evidence(
    "measured",
    "≈14 % faster with foreign-key and unique checks off (more with more foreign keys)",
    "Aurora MySQL, 20 M rows from S3 into a table with a PK and one FK: 617 s with checks, 529 s with "
    "unique_checks = 0 and foreign_key_checks = 0 — 'use this only if your input files are consistent'",
    AURORA_LOAD,
)
TRIGGERS_PER_ROW = Evidence(
    "inferred",
    "row triggers run once per loaded row; no source measured them",
    "the nearest measured per-row check is the ≈14 % of foreign-key checks on Aurora MySQL "
    "(617 s vs 529 s, 20 M rows); PostgreSQL runs foreign-key checks as row triggers too",
    AURORA_LOAD,
)
FILE_SIZE = Evidence(
    "guidance",
    "ideal file size 100 MB - 1 GB; many small files slow the load",
    "'In Amazon S3 the ideal file size for data load performance should be between 100 MB and 1 GB. "
    "Performance can deteriorate if many small files are used due to the overhead of opening files, "
    "reading metadata and closing files'",
    AURORA_LOAD,
)
LARGE_TRANSACTIONS = Evidence(
    "measured",
    "one chunk is one transaction: committing every 100 k rows cost only ≈7 %",
    "MariaDB, 5 M rows, 2 cores; a LOAD DATA of a huge file is one transaction with a large undo "
    "log (innodb-bulk-insert-tuning, comments), and a retry redoes all of it",
    PROJECT_BENCH,
)
PARALLEL_MYSQL = Evidence(
    "measured",
    "10 threads were optimal on 16 vCPUs; more took longer and used much more CPU",
    "Aurora MySQL db.r6g.4xlarge (16 vCPU), 1 to 16 parallel load threads: optimum at 10; above it, "
    "lock waits on the table negated the gain",
    AURORA_LOAD,
)
PARALLEL_POSTGRES = Evidence(
    "measured",
    "parallel COPY sessions cut a 7-file load by 56 %; keep sessions at vCPUs - 1",
    "RDS PostgreSQL db.r6g.2xlarge (8 vCPU): 7 files 2 min 9 s sequentially vs 57 s in parallel, CPU "
    "peaking at 90 %; 'limit the number of concurrent bulk loading sessions to one less than the "
    "number of vCPUs'",
    RDS_PG_BULK,
)
PARALLEL_TWO_VCPUS = Evidence(
    "measured",
    "on 2 vCPUs two load sessions beat one: load 8.1 s against 11.7-12.3 s (PostgreSQL), "
    "31.2-32.5 s against 38.3 s (MariaDB)",
    "10 M rows as 8 gzip parts from S3, the pipeline with parallelism 1 and 2 one after another "
    "on a 2-core machine that also ran the workers (2026-11-27); while one session waits on its "
    "client or the network, the other keeps the server busy",
    PIPELINE_BENCH,
)
AUTOINC_TABLE_LOCK = Evidence(
    "measured",
    "with innodb_autoinc_lock_mode below 2, each LOAD DATA into a table with an AUTO_INCREMENT "
    "column holds the table's AUTO-INC lock until the statement ends: loads run one at a time",
    "MariaDB 10.11, innodb_autoinc_lock_mode 1 (its default; MySQL 8.0's is 2): a second load "
    "session waited for the first one's statement, even with the ids in the file, and failed after "
    "innodb_lock_wait_timeout (50 s by default)",
    AUTOINC_LOCK_TEST,
)
GP2_IOPS = Evidence(
    "measured",
    "a 250 GB gp2 volume (750 IOPS) throttled a single COPY; 4,400+ IOPS made it 82 % faster",
    "RDS PostgreSQL db.r6g.2xlarge, one 361 MB gzip file: disk queue depth 2,048 (≈2,750 IOPS "
    "demanded) on 250 GB gp2; 1,500 GB gp2 (4,400 IOPS) or io1 at 10,000 IOPS cut 5 min 45 s to just "
    "over 1 min",
    RDS_PG_BULK,
)
CHECKPOINT_AFTER_LOAD = Evidence(
    "guidance",
    "a manual CHECKPOINT after the load keeps a crash soon after it from replaying the load's WAL",
    "the source ends its optimised load with a manual CHECKPOINT before restoring the settings",
    RDS_PG_BULK,
)
PARTITIONED_STORAGE = Evidence(
    "requirement",
    "a partitioned table has no storage: PostgreSQL refuses autovacuum_enabled on it and keeps "
    "storage options per partition; its indexes are partitioned indexes, one per partition",
    "prepare sets autovacuum per leaf partition and keeps the partitioned indexes and keys",
    PROJECT_BENCH,
)
COLUMN_MAPPING = Evidence(
    "requirement",
    "COPY and LOAD DATA name the target columns: a name the table lacks fails every chunk, and a "
    "NOT NULL column without a default that the input lacks fails every row",
    "checked before bulk mode and table preparation, so a mismatch changes nothing on the server",
    PROJECT_BENCH,
)
GP2_BASELINE = Evidence(
    "requirement",
    "gp2 baseline IOPS = 3 per GB (min 100, max 16,000); burst to 3,000 below 1 TB while credits last",
    "a volume starts with 5.4 M I/O credits; burst lasts 5.4 M / (3,000 - baseline) seconds",
    AWS_EBS_DOC,
)
BULK_PARAMETERS = Evidence(
    "measured",
    "bulk parameters (WAL/checkpoint/maintenance memory) gave another 23 %",
    "RDS PostgreSQL: a custom parameter group with maintenance_work_mem 1 GB, max_wal_size 4 GB, "
    "checkpoint_timeout 30 min (plus per-transaction synchronous_commit off) took one file from "
    "57 s to 44 s; default parameter groups cannot be modified, so this needs a custom group",
    RDS_PG_BULK,
)
MAINTENANCE_WINDOW = Evidence(
    "guidance",
    "avoid bulk loading during the weekly maintenance window",
    "'It is recommended to avoid bulk loading when weekly maintenance is being performed'",
    RDS_PG_BULK,
)
LOCAL_INFILE = Evidence(
    "requirement",
    "LOAD DATA LOCAL INFILE reads the file from the client; the server must allow it",
    "the client method streams each chunk through the worker with LOAD DATA LOCAL INFILE; with "
    "local_infile off the server refuses the statement",
    AURORA_LOAD,
)
AWS_S3_EXTENSION = Evidence(
    "requirement",
    "COPY from S3 needs the aws_s3 extension and an IAM role for the s3Import feature",
    "'To bulk load files from Amazon S3 using the COPY command, you need to install the aws_s3 "
    "extension ... You also need to associate an IAM role' (add-role-to-db-instance --feature-name "
    "s3Import)",
    RDS_PG_BULK,
)
AURORA_S3_ROLE = Evidence(
    "requirement",
    "LOAD DATA FROM S3 needs an IAM role named by aurora_load_from_s3_role or aws_default_s3_role",
    "the role must be associated with the cluster and named in the DB cluster parameter group",
    AWS_AURORA_S3_DOC,
)
MULTI_AZ = Evidence(
    "guidance",
    "never disable Multi-AZ to load faster",
    "'Disabling Multi-AZ will yield better bulk loading performance, but it is not recommended for "
    "production workloads due to the durability and availability risk'",
    RDS_PG_BULK,
)
UNLOGGED_TABLES = Evidence(
    "guidance",
    "unlogged tables are emptied after a crash or failover and are not replicated",
    "'PostgreSQL truncates all unlogged tables on startup, including failovers and snapshot "
    "restores. Unlogged tables are also not replicated to PostgreSQL replicas'",
    RDS_PG_BULK,
)
DOUBLEWRITE = Evidence(
    "guidance",
    "skipping the InnoDB doublewrite buffer risks torn pages (corruption) after a crash",
    "the post cut load time to a tenth with a larger log buffer and skip-innodb_doublewrite; its "
    "comments warn: 'DISABLING THE innodb doublewrite MAY CORRUPT YOUR DATA'",
    INNODB_TUNING,
)
LOAD_MODES = Evidence(
    "inferred",
    "a replace loads into an empty table with its indexes dropped (the fastest path measured), "
    "where an append into a full table keeps them",
    "index drop + rebuild on an empty table was 6-7x faster than COPY into the indexed table; a "
    "replace always loads that way, whatever the target holds",
    PROJECT_BENCH,
)
