"""The ``replace`` swap on PostgreSQL: a work table takes the target's place in one transaction.

Everything the new table must carry over from the old one is read first, then applied: the old
table's serial sequences pass to the new table, the old table is dropped, the new one takes its
name, and its indexes, constraints, statistics objects and identity sequences take the old ones'
names. Owner, grants (exactly the old ones: default privileges the loading role brings are taken
back), comments, row-level security, replica identity, the CLUSTER index, UNLOGGED and the
columns' statistics targets follow. A generated id continues past the loaded rows. Runs in the
caller's transaction, after ``LOCK TABLE ... ACCESS EXCLUSIVE``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from psycopg import sql

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.dialects.postgres.session import table_identifier
from airflow_bulkload.exceptions import BulkLoadError

#: what makes an index the same index on another table: everything but its name and table
_INDEX_SHAPE = """
SELECT i.relname, concat_ws('|', x.indisunique, x.indisprimary, x.indisexclusion, x.indnkeyatts,
    (SELECT string_agg(coalesce(a.attname, '#expr'), ',' ORDER BY k.ord)
       FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
       LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum),
    x.indclass::text, x.indcollation::text, x.indoption::text, am.amname,
    pg_catalog.pg_get_expr(x.indexprs, x.indrelid), pg_catalog.pg_get_expr(x.indpred, x.indrelid),
    i.reloptions::text), x.indisclustered, x.indisreplident
FROM pg_catalog.pg_index x
JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
JOIN pg_catalog.pg_am am ON am.oid = i.relam
WHERE x.indrelid = %s::regclass
ORDER BY i.relname
"""
#: an extended statistics object, by what it is on
_STATISTICS_SHAPE = """
SELECT s.stxname, concat_ws('|', s.stxkind::text,
    (SELECT string_agg(a.attname, ',' ORDER BY a.attnum) FROM pg_catalog.pg_attribute a
      WHERE a.attrelid = s.stxrelid AND a.attnum = ANY (s.stxkeys::int2[])),
    pg_catalog.pg_get_expr(s.stxexprs, s.stxrelid)), s.stxstattarget
FROM pg_catalog.pg_statistic_ext s WHERE s.stxrelid = %s::regclass ORDER BY s.stxname
"""
#: grants as (grantee or '' for PUBLIC, privilege, grantable, column or '')
_GRANTS = """
SELECT CASE WHEN a.grantee = 0 THEN '' ELSE pg_catalog.pg_get_userbyid(a.grantee) END,
    a.privilege_type, a.is_grantable::text, ''
FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
WHERE c.oid = %(t)s::regclass AND a.grantee <> c.relowner
UNION ALL
SELECT CASE WHEN a.grantee = 0 THEN '' ELSE pg_catalog.pg_get_userbyid(a.grantee) END,
    a.privilege_type, a.is_grantable::text, att.attname
FROM pg_catalog.pg_attribute att, pg_catalog.aclexplode(att.attacl) a
WHERE att.attrelid = %(t)s::regclass AND att.attacl IS NOT NULL
"""


def _in_schema(table: TableRef, name: str) -> sql.Identifier:
    return table_identifier(TableRef(name, table.schema))


def _shapes(conn: Any, query: str, regclass: str) -> dict[str, list[tuple[Any, ...]]]:
    found: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in conn.execute(query, (regclass,)):
        found[row[1]].append(row)
    return found


def _pairs(
    old: dict[str, list[tuple[Any, ...]]], new: dict[str, list[tuple[Any, ...]]], what: str
) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """Each old object with its copy on the new table (same shape, in name order)."""
    if sorted((k, len(v)) for k, v in old.items()) != sorted((k, len(v)) for k, v in new.items()):
        raise BulkLoadError(
            f"the work table does not have the {what} of the table (old "
            f"{sorted(r[0] for rows in old.values() for r in rows)}, new "
            f"{sorted(r[0] for rows in new.values() for r in rows)}); the swap is refused and "
            "the table is unchanged"
        )
    return [pair for shape, rows in old.items() for pair in zip(rows, new[shape], strict=True)]


def _grant(conn: Any, new: sql.Identifier, row: tuple[Any, ...], revoke: bool = False) -> None:
    grantee, privilege, grantable, column = row
    conn.execute(
        sql.SQL("{} {} {} ON {} {} {}{}").format(
            sql.SQL("REVOKE" if revoke else "GRANT"),
            sql.SQL(privilege),  # one of aclexplode's fixed keywords
            sql.SQL("({})").format(sql.Identifier(column)) if column else sql.SQL(""),
            new,
            sql.SQL("FROM" if revoke else "TO"),
            sql.Identifier(grantee) if grantee else sql.SQL("PUBLIC"),
            sql.SQL(" WITH GRANT OPTION") if grantable == "true" and not revoke else sql.SQL(""),
        )
    )


def _continue_past_rows(conn: Any, target: sql.Identifier, regclass: str, column: str) -> None:
    schema, name = conn.execute(
        "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c"
        " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.oid = pg_catalog.pg_get_serial_sequence(%s, %s)::regclass",
        (regclass, column),
    ).fetchone()
    sequence = sql.Identifier(schema, name)
    highest = conn.execute(
        sql.SQL("SELECT max({}) FROM {}").format(sql.Identifier(column), target)
    ).fetchone()[0]
    last_value, is_called = conn.execute(
        sql.SQL("SELECT last_value, is_called FROM {}").format(sequence)
    ).fetchone()
    if highest is not None and (highest > last_value or (highest == last_value and not is_called)):
        conn.execute(
            "SELECT pg_catalog.setval(%s::regclass, %s, true)", (sequence.as_string(conn), highest)
        )


def swap_tables(conn: Any, table: TableRef, work: TableRef) -> list[str]:
    """Put ``work`` in ``table``'s place (see the module docstring); what was carried over."""
    target, new = table_identifier(table), table_identifier(work)
    regclass, work_regclass = target.as_string(conn), new.as_string(conn)
    conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(target))
    indexes = _pairs(
        _shapes(conn, _INDEX_SHAPE, regclass), _shapes(conn, _INDEX_SHAPE, work_regclass), "indexes"
    )
    statistics = _pairs(
        _shapes(conn, _STATISTICS_SHAPE, regclass),
        _shapes(conn, _STATISTICS_SHAPE, work_regclass),
        "statistics objects",
    )
    owner, comment, rls, force_rls, replident = conn.execute(
        "SELECT pg_catalog.pg_get_userbyid(relowner), pg_catalog.obj_description(oid, 'pg_class'),"
        " relrowsecurity, relforcerowsecurity, relreplident"
        " FROM pg_catalog.pg_class WHERE oid = %s::regclass",
        (regclass,),
    ).fetchone()
    constraint_comments = conn.execute(
        "SELECT conname, pg_catalog.obj_description(oid, 'pg_constraint')"
        " FROM pg_catalog.pg_constraint WHERE conrelid = %s::regclass"
        " AND pg_catalog.obj_description(oid, 'pg_constraint') IS NOT NULL",
        (regclass,),
    ).fetchall()
    stattargets = conn.execute(
        "SELECT attname, attstattarget FROM pg_catalog.pg_attribute WHERE attrelid = %s::regclass"
        " AND attnum > 0 AND NOT attisdropped AND attstattarget >= 0",
        (regclass,),
    ).fetchall()
    serials = conn.execute(
        "SELECT n.nspname, s.relname, a.attname FROM pg_catalog.pg_depend d"
        " JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'"
        " JOIN pg_catalog.pg_namespace n ON n.oid = s.relnamespace"
        " JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
        " WHERE d.classid = 'pg_catalog.pg_class'::regclass"
        " AND d.refobjid = %s::regclass AND d.deptype = 'a'",
        (regclass,),
    ).fetchall()
    identities = conn.execute(
        "SELECT a.attname, os.relname, ns.nspname, ns.relname, os.nspname"
        " FROM pg_catalog.pg_attribute a"
        " JOIN LATERAL (SELECT n.nspname, s.relname FROM pg_catalog.pg_class s"
        "  JOIN pg_catalog.pg_namespace n ON n.oid = s.relnamespace"
        "  WHERE s.oid = pg_catalog.pg_get_serial_sequence(%s, a.attname)::regclass) os ON true"
        " JOIN LATERAL (SELECT n.nspname, s.relname FROM pg_catalog.pg_class s"
        "  JOIN pg_catalog.pg_namespace n ON n.oid = s.relnamespace"
        "  WHERE s.oid = pg_catalog.pg_get_serial_sequence(%s, a.attname)::regclass) ns ON true"
        " WHERE a.attrelid = %s::regclass AND a.attidentity <> '' AND NOT a.attisdropped",
        (regclass, work_regclass, regclass),
    ).fetchall()
    positions = [
        (
            column,
            *conn.execute(
                sql.SQL("SELECT last_value, is_called FROM {}").format(sql.Identifier(schema, name))
            ).fetchone(),
        )
        for column, name, _, _, schema in identities
    ]

    # the new table's access: exactly the old one's
    if owner != conn.execute("SELECT current_user").fetchone()[0]:
        conn.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(new, sql.Identifier(owner)))
    for row in conn.execute(_GRANTS, {"t": work_regclass}).fetchall():
        _grant(conn, new, row, revoke=True)
    grants = conn.execute(_GRANTS, {"t": regclass}).fetchall()
    for row in grants:
        _grant(conn, new, row)
    for schema, sequence, column in serials:
        conn.execute(
            sql.SQL("ALTER SEQUENCE {} OWNED BY {}").format(
                sql.Identifier(schema, sequence),
                sql.SQL("{}.{}").format(new, sql.Identifier(column)),
            )
        )

    conn.execute(sql.SQL("DROP TABLE {}").format(target))
    conn.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(new, sql.Identifier(table.name)))
    for old_index, new_index in indexes:
        conn.execute(
            sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                _in_schema(table, new_index[0]), sql.Identifier(old_index[0])
            )
        )
        if old_index[2]:
            conn.execute(
                sql.SQL("ALTER TABLE {} CLUSTER ON {}").format(target, sql.Identifier(old_index[0]))
            )
        if old_index[3] and replident == "i":
            conn.execute(
                sql.SQL("ALTER TABLE {} REPLICA IDENTITY USING INDEX {}").format(
                    target, sql.Identifier(old_index[0])
                )
            )
    if replident in ("f", "n"):
        conn.execute(
            sql.SQL("ALTER TABLE {} REPLICA IDENTITY {}").format(
                target, sql.SQL("FULL" if replident == "f" else "NOTHING")
            )
        )
    for old_stat, new_stat in statistics:
        conn.execute(
            sql.SQL("ALTER STATISTICS {} RENAME TO {}").format(
                _in_schema(table, new_stat[0]), sql.Identifier(old_stat[0])
            )
        )
        if old_stat[2] is not None and old_stat[2] >= 0:
            conn.execute(
                sql.SQL("ALTER STATISTICS {} SET STATISTICS {}").format(
                    _in_schema(table, old_stat[0]), sql.Literal(old_stat[2])
                )
            )
    for column, target_value in stattargets:
        conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STATISTICS {}").format(
                target, sql.Identifier(column), sql.Literal(target_value)
            )
        )
    for (column, old_name, new_schema, new_name, _), (_, last_value, is_called) in zip(
        identities, positions, strict=True
    ):
        # the old identity sequence went with the old table: its name and position carry on
        conn.execute(
            sql.SQL("ALTER SEQUENCE {} RENAME TO {}").format(
                sql.Identifier(new_schema, new_name), sql.Identifier(old_name)
            )
        )
        conn.execute(
            "SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence(%s, %s), %s, %s)",
            (regclass, column, last_value, is_called),
        )
    # a generated id continues past the loaded rows (the snapshot brought its own ids)
    for column in [c for _, _, c in serials] + [c for c, *_ in identities]:
        _continue_past_rows(conn, target, regclass, column)
    if rls:
        conn.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(target))
    if force_rls:
        conn.execute(sql.SQL("ALTER TABLE {} FORCE ROW LEVEL SECURITY").format(target))
    conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(target, sql.Literal(comment)))
    for name, text in constraint_comments:
        conn.execute(
            sql.SQL("COMMENT ON CONSTRAINT {} ON {} IS {}").format(
                sql.Identifier(name), target, sql.Literal(text)
            )
        )
    notes = [f"indexes renamed to {[old[0] for old, _ in indexes]}"]
    if grants:
        notes.append(f"{len(grants)} grant(s) as before")
    if serials or identities:
        notes.append("generated ids continue past the loaded rows")
    return notes
