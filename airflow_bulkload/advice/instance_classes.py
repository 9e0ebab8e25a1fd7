"""vCPU counts of RDS instance classes, without an API call for the common ones.

Current RDS classes follow EC2's size scheme: ``large`` = 2 vCPUs, ``xlarge`` = 4, ``Nxlarge`` =
4·N, for every family (m, r, x, z, c, their g/d/i/n variants). Only the burstable micro/small sizes
of older families and ``metal``/serverless need a table or an API (EC2 ``describe_instance_types``).
"""

from __future__ import annotations

import re

_EXCEPTIONS: dict[str, int] = {
    "db.t2.micro": 1,
    "db.t2.small": 1,
    "db.t2.medium": 2,
    "db.t3.micro": 2,
    "db.t3.small": 2,
    "db.t3.medium": 2,
    "db.t4g.micro": 2,
    "db.t4g.small": 2,
    "db.t4g.medium": 2,
    "db.m1.small": 1,
    "db.m1.medium": 1,
    "db.m3.medium": 1,
}

_CLASS = re.compile(r"^db\.(?P<family>[a-z][a-z0-9-]*)\.(?P<size>[a-z0-9-]+)$")
_NXLARGE = re.compile(r"^(?P<n>\d+)xlarge$")


def vcpus_for_class(instance_class: str) -> int | None:
    """The vCPU count of ``db.<family>.<size>``, or ``None`` when the size does not say it.

    ``None`` for ``db.serverless``, ``metal`` and unknown sizes: ask EC2 then, see
    :func:`ec2_instance_type`.
    """
    name = instance_class.strip().lower()
    if name in _EXCEPTIONS:
        return _EXCEPTIONS[name]
    match = _CLASS.match(name)
    if match is None:
        return None
    size = match["size"]
    if size == "large":
        return 2
    if size == "xlarge":
        return 4
    nx = _NXLARGE.match(size)
    if nx:
        return 4 * int(nx["n"])
    if size in ("micro", "small", "medium") and match["family"].startswith("t"):
        return 2
    return None


def ec2_instance_type(instance_class: str) -> str | None:
    """``db.r6g.large`` -> ``r6g.large`` (the EC2 type behind the class); ``None`` for serverless."""
    name = instance_class.strip().lower()
    if not name.startswith("db.") or name == "db.serverless":
        return None
    return name[len("db.") :]
