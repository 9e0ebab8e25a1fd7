"""Errors users meet, each saying where the problem is and what was expected."""

from __future__ import annotations

from airflow.exceptions import AirflowException


class BulkLoadError(AirflowException):
    """Base class for every error this provider raises on purpose."""


class InvalidIdentifierError(BulkLoadError, ValueError):
    """A table/column/schema name that cannot be quoted safely (NUL byte, too long, empty)."""


class TableNotFoundError(BulkLoadError, LookupError):
    """The target table does not exist (or the connection's user cannot see it)."""


class InvalidFileFormatError(BulkLoadError, ValueError):
    """File format options that are malformed or unsafe (e.g. a multi-character delimiter)."""


class ChunkLoadError(BulkLoadError):
    """A chunk could not be loaded; names the source object, the line and column, and the reason.

    Nothing of the chunk stays in the table when this is raised: its transaction was rolled back.
    ``outcome`` ends the message: what this left of the table (a withdraw's errors say that
    nothing was taken out).
    """

    def __init__(
        self,
        source: str,
        reason: str,
        *,
        line: int | None = None,
        column: str | None = None,
        expected: str | None = None,
        outcome: str = "nothing of this chunk was loaded",
    ) -> None:
        self.source = source
        self.reason = reason
        self.line = line
        self.column = column
        self.expected = expected
        where = [source]
        if line is not None:
            where.append(f"line {line}")
        if column:
            where.append(f"column {column}")
        message = f"{', '.join(where)}: {reason}"
        if expected:
            message += f" (expected {expected})"
        super().__init__(f"{message}; {outcome}")


class RowCountMismatchError(ChunkLoadError):
    """The engine loaded a different number of rows than the manifest promised."""


class ChunkConflictError(BulkLoadError):
    """The ledger holds this chunk key with a different checksum: the staged input changed."""


class BulkModeRefusedError(BulkLoadError):
    """Bulk mode cannot be entered as asked; nothing was changed. The message says what to do."""


class BulkModeStateError(BulkLoadError):
    """The instance or server is not in a state where bulk mode can be changed safely."""


class PreflightFailedError(BulkLoadError):
    """Pre-flight found problems at a severity the DAG author chose to fail on."""


class LoadSlotsBusyError(BulkLoadError, TimeoutError):
    """Every load slot of the table stayed held by other loads for the whole wait."""


class TableClaimedError(BulkLoadError):
    """Another load holds the table's prepare/finalize claim; the message names the holder."""


class TableStateError(BulkLoadError):
    """The table does not match its saved state after a rebuild; the saved state is kept."""


class DuplicateKeyError(TableStateError):
    """A saved unique index/constraint could not be rebuilt: the loaded data has duplicate keys.

    The saved state is kept: remove the duplicates and run finalize (or restore) again.
    """

    def __init__(self, message: str, *, index: str, sample: list[str]) -> None:
        self.index = index
        self.sample = sample
        super().__init__(message)


class InsufficientPrivilegeError(BulkLoadError):
    """The database user may not run a statement this provider needs; the message says which."""


class WithdrawMismatchError(BulkLoadError):
    """Taking a chunk back out would delete another number of rows than the chunk inserted.

    Rows the chunk did not insert share its keys. Nothing was deleted.
    """


class WithdrawChangedRowsError(WithdrawMismatchError):
    """Taking a chunk back out would delete rows that hold other values than the chunk's.

    They were changed since it loaded (another load re-delivered their keys, or a person updated
    them), and reloading the chunk would overwrite them. Nothing was deleted.
    """


class LoadVerificationError(BulkLoadError):
    """The rows the load report claims are not what the target table holds."""


class InputAlreadyLoadedError(BulkLoadError):
    """The run's date was already loaded, and verified, from another input."""


class ForeignKeyViolationError(TableStateError):
    """A foreign key dropped for the load could not be re-added.

    Loaded rows reference parents that do not exist. The foreign key is not left half-added (NOT
    VALID).
    """


class NulByteError(BulkLoadError):
    """The input holds a NUL byte (U+0000), refused at staging for both engines."""

    def __init__(self, where: str) -> None:
        self.where = where
        super().__init__(
            f"the input holds a NUL byte (U+0000) in {where}: PostgreSQL cannot store it in text "
            "and MySQL would store it verbatim, so it is refused for both. Remove NUL bytes from "
            "the input (e.g. tr -d '\\000'), or map them to a character of your choice, and run "
            "again"
        )


class LoadModeError(BulkLoadError, ValueError):
    """The load mode cannot load this table as it promises (see :mod:`airflow_bulkload.modes`)."""
