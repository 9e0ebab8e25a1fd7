"""The PostgreSQL state schema ``bulkload``: its tables, one migration per step."""

from __future__ import annotations

from psycopg import sql

STATE_SCHEMA = "bulkload"

#: advisory-lock class (two-int4 key space) for state-schema migrations; chunk claims use the
#: separate bigint key space, which PostgreSQL keeps apart from the two-int4 one.
_MIGRATION_LOCK = (0x626C6B64, 1)  # "blkd", 1

_S = sql.Identifier(STATE_SCHEMA)

#: The state schema, one migration per step. A migration runs once, in order, under an
#: advisory lock, and is recorded in ``bulkload.schema_migrations``; later features append
#: steps (saved table state and claims, bulk-mode leases), never edit applied ones.
MIGRATIONS: tuple[tuple[int, str, sql.Composed], ...] = (
    (
        1,
        "chunk ledger",
        sql.SQL(
            """
            CREATE TABLE {s}.chunk_ledger (
                table_name text NOT NULL,
                chunk_key text NOT NULL,
                checksum text NOT NULL,
                rows bigint NOT NULL CHECK (rows >= 0),
                bytes bigint NOT NULL CHECK (bytes >= 0),
                load_id text NOT NULL DEFAULT '',
                loaded_at timestamptz NOT NULL DEFAULT now(),
                CONSTRAINT chunk_ledger_once UNIQUE (table_name, chunk_key, checksum)
            );
            COMMENT ON TABLE {s}.chunk_ledger IS
                'Chunks committed by airflow_bulkload: one row per chunk, written in the '
                'transaction that loaded it. The unique key''s (table_name, chunk_key) prefix '
                'finds a chunk loaded with another checksum.';
            """
        ).format(s=_S),
    ),
    (
        2,
        "bulk-mode leases and saved server settings",
        sql.SQL(
            """
            CREATE TABLE {s}.bulk_mode_leases (
                token text PRIMARY KEY,
                holder text NOT NULL,
                expires_at double precision NOT NULL
            );
            COMMENT ON TABLE {s}.bulk_mode_leases IS
                'Holders of bulk mode on this server (dag/table/logical date); settings are '
                'restored when the last live lease goes. expires_at is epoch seconds.';
            CREATE TABLE {s}.bulk_mode_settings (
                name text PRIMARY KEY,
                original text,
                position integer NOT NULL,
                saved_at timestamptz NOT NULL DEFAULT now()
            );
            COMMENT ON TABLE {s}.bulk_mode_settings IS
                'Server settings bulk mode changed, with their postgresql.auto.conf value before '
                '(NULL: not set there, restored with ALTER SYSTEM RESET).';
            """
        ).format(s=_S),
    ),
    (
        3,
        "saved table state and per-table claims",
        sql.SQL(
            """
            CREATE TABLE {s}.table_state (
                table_name text NOT NULL,
                load_id text NOT NULL,
                status text NOT NULL CHECK (status IN ('saved', 'prepared', 'done')),
                saved jsonb NOT NULL,
                dropped jsonb NOT NULL DEFAULT '[]',
                decision jsonb NOT NULL DEFAULT '{{}}',
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (table_name, load_id)
            );
            COMMENT ON TABLE {s}.table_state IS
                'A table''s indexes, constraints and reloptions, saved by prepare_table before '
                'anything was dropped; finalize/restore rebuild from it and mark it done.';
            CREATE TABLE {s}.table_claims (
                table_name text PRIMARY KEY,
                load_id text NOT NULL,
                holder text NOT NULL,
                claimed_at timestamptz NOT NULL DEFAULT now()
            );
            COMMENT ON TABLE {s}.table_claims IS
                'The load that prepared a table and has not finalized/restored it yet: a second '
                'load of the table waits or fails naming the holder.';
            """
        ).format(s=_S),
    ),
    (
        4,
        "ledger entries bound to the table's rows, and load records",
        sql.SQL(
            """
            ALTER TABLE {s}.chunk_ledger
                ADD COLUMN probe jsonb,
                ADD COLUMN generation text;
            COMMENT ON COLUMN {s}.chunk_ledger.probe IS
                'The chunk''s first and last key: looked up before a re-run skips the chunk.';
            COMMENT ON COLUMN {s}.chunk_ledger.generation IS
                'The table''s oid and filenode when the chunk loaded (changes on re-create, '
                'TRUNCATE, VACUUM FULL, CLUSTER).';
            CREATE TABLE {s}.loads (
                table_name text NOT NULL,
                staging_prefix text NOT NULL,
                load_id text NOT NULL,
                empty_before boolean NOT NULL,
                verified boolean NOT NULL DEFAULT false,
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (table_name, staging_prefix)
            );
            COMMENT ON TABLE {s}.loads IS
                'One staged input loaded into a table: whether the table was empty when the load '
                'began, and whether the load report verified the rows in the table.';
            """
        ).format(s=_S),
    ),
)
