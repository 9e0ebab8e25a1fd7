"""The MySQL state tables (``bulkload_*``), created and upgraded by ``ensure_state_schema``."""

from __future__ import annotations

#: the durable state tables, created in order by ensure_state_schema; later features append here.
#: ``{db}`` is the quoted state database. Hash columns keep keys under InnoDB's key size limit.
STATE_TABLES: dict[str, str] = {
    "bulkload_chunk_ledger": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_chunk_ledger` (
            `chunk_id` BINARY(32) NOT NULL
                COMMENT 'SHA-256 of table name, NUL, chunk key',
            `checksum` VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            `table_name` VARCHAR(160) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `chunk_key` VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `row_count` BIGINT NOT NULL,
            `byte_count` BIGINT NOT NULL,
            `load_id` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `loaded_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            `probe` LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL
                COMMENT 'JSON: the chunk''s first and last key, looked up before a skip',
            `generation` VARCHAR(64) CHARACTER SET ascii NULL
                COMMENT 'InnoDB table id when the chunk loaded (changes on re-create, TRUNCATE, OPTIMIZE)',
            PRIMARY KEY (`chunk_id`, `checksum`),
            KEY `bulkload_chunk_ledger_table` (`table_name`, `loaded_at`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: chunks committed into each table'
    """,
    "bulkload_bulk_mode_leases": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_bulk_mode_leases` (
            `token` VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            `holder` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `expires_at` DOUBLE NOT NULL COMMENT 'epoch seconds',
            PRIMARY KEY (`token`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: holders of bulk mode on this server (dag/table/logical date)'
    """,
    "bulkload_bulk_mode_settings": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_bulk_mode_settings` (
            `name` VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            `original` TEXT NULL COMMENT 'the global value before bulk mode',
            `position` INT NOT NULL,
            `saved_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            PRIMARY KEY (`name`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: server settings bulk mode changed, to restore at exit'
    """,
    "bulkload_table_state": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_table_state` (
            `state_id` BINARY(32) NOT NULL COMMENT 'SHA-256 of table name, NUL, load id',
            `table_name` VARCHAR(160) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `load_id` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `status` VARCHAR(16) CHARACTER SET ascii NOT NULL,
            `saved` LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'JSON',
            `dropped` LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'JSON',
            `decision` LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'JSON',
            `created_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            `updated_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            PRIMARY KEY (`state_id`),
            CONSTRAINT `bulkload_table_state_status`
                CHECK (`status` IN ('saved', 'prepared', 'done'))
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: index/constraint DDL saved before prepare_table dropped any'
    """,
    "bulkload_table_claims": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_table_claims` (
            `table_id` BINARY(32) NOT NULL COMMENT 'SHA-256 of table name',
            `table_name` VARCHAR(160) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `load_id` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `holder` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `claimed_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            PRIMARY KEY (`table_id`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: the load holding a table between prepare and finalize'
    """,
    "bulkload_loads": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_loads` (
            `load_key` BINARY(32) NOT NULL COMMENT 'SHA-256 of table name, NUL, staging prefix',
            `table_name` VARCHAR(160) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `staging_prefix` VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `load_id` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `empty_before` TINYINT(1) NOT NULL,
            `verified` TINYINT(1) NOT NULL DEFAULT 0,
            `updated_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            PRIMARY KEY (`load_key`),
            KEY `bulkload_loads_table` (`table_name`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: staged inputs loaded into each table, and whether verified'
    """,
}

#: columns added to state tables after they first shipped: (table, column, definition), added by
#: ensure_state_schema where missing
STATE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "bulkload_chunk_ledger",
        "probe",
        "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL",
    ),
    ("bulkload_chunk_ledger", "generation", "VARCHAR(64) CHARACTER SET ascii NULL"),
)

_ER_DUP_FIELDNAME = 1060
