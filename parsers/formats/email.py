"""E-mail formats."""
from __future__ import annotations

FORMATS = ()
