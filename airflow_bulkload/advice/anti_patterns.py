"""Speed-ups the advice never recommends, because they trade away durability.

The seeds measured them faster and said not to use them. :func:`check_no_anti_patterns` runs on
every report, so a rule that starts recommending one fails loudly instead of shipping the advice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from airflow_bulkload.advice import evidence as ev
from airflow_bulkload.advice.models import Finding


@dataclass(frozen=True)
class AntiPattern:
    name: str
    pattern: re.Pattern[str]
    evidence: ev.Evidence


ANTI_PATTERNS: tuple[AntiPattern, ...] = (
    AntiPattern(
        "disable Multi-AZ",
        re.compile(
            r"\b(disable|turn off|switch off|remove|drop)\b[^.;]*\bmulti[- ]?az\b"
            r"|\bmulti[- ]?az\b[^.;]*\b(=|to)\s*(false|off|no|0)\b|--no-multi-az",
            re.IGNORECASE,
        ),
        ev.MULTI_AZ,
    ),
    AntiPattern(
        "unlogged tables",
        re.compile(
            r"\b(create|set|make|use|alter)\b[^.;]*\bunlogged\b|\bset\s+unlogged\b", re.IGNORECASE
        ),
        ev.UNLOGGED_TABLES,
    ),
    AntiPattern(
        "InnoDB doublewrite off",
        re.compile(
            r"skip[-_]innodb[-_]doublewrite"
            r"|innodb_doublewrite\s*(=|to)\s*(0|off|false)"
            r"|\b(disable|turn off|switch off|skip)\b[^.;]*\bdoublewrite\b",
            re.IGNORECASE,
        ),
        ev.DOUBLEWRITE,
    ),
)


class AntiPatternRecommendedError(AssertionError):
    """A finding's fix recommends an anti-pattern: a bug in a rule, never shipped to a user."""


def anti_patterns_in(text: str) -> list[AntiPattern]:
    return [a for a in ANTI_PATTERNS if a.pattern.search(text)]


def check_no_anti_patterns(findings: Iterable[Finding]) -> None:
    for finding in findings:
        found = anti_patterns_in(finding.fix)
        if found:
            raise AntiPatternRecommendedError(
                f"rule {finding.rule} recommends {', '.join(a.name for a in found)}: "
                f"{finding.fix!r}"
            )
