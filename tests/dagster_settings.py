"""CitekeeperSettings from fields by name: a resource's field goes to the resource that declares it, the rest
(ingest_shards, verify_shards, executor) to the settings themselves."""

from __future__ import annotations

from assets.resources import CitekeeperSettings

RESOURCE_TYPES = {name: type(resource) for name, resource in CitekeeperSettings().resources().items()}


def settings(**fields) -> CitekeeperSettings:
    resources = {
        name: kind(**{field: fields.pop(field) for field in list(fields) if field in kind.model_fields})
        for name, kind in RESOURCE_TYPES.items()
    }
    return CitekeeperSettings(**resources, **fields)  # an unknown field is a TypeError here
