"""Verification of claims against their evidence: tiers, checkers, engine, metrics, verdict cache, outputs."""
