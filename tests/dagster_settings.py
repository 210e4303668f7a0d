"""CitekeeperSettings from resource fields by name, each routed to the resource that declares it."""
from __future__ import annotations

from assets.resources import CitekeeperSettings

RESOURCE_TYPES = {name: type(resource) for name, resource in CitekeeperSettings().resources().items()}


def settings(ingest_shards: int = 4, verify_shards: int = 2, **fields) -> CitekeeperSettings:
    unknown = set(fields) - {name for kind in RESOURCE_TYPES.values() for name in kind.model_fields}
    if unknown:
        raise TypeError(f"no resource has the field(s) {sorted(unknown)}")
    resources = {
        name: kind(**{field: value for field, value in fields.items() if field in kind.model_fields})
        for name, kind in RESOURCE_TYPES.items()
    }
    return CitekeeperSettings(**resources, ingest_shards=ingest_shards, verify_shards=verify_shards)
