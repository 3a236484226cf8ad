"""The result type every metric suite returns: metrics, breakdowns, unavailable, signatures.

It maps one-to-one onto metrics.json's ``metrics``, ``breakdowns``, ``unavailable`` and
``provenance.libraries`` fields (docs/design.md §5, §8), so suites can be merged and handed to
``report.build_metrics``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

__all__ = ["Scores", "as_reference_lists"]


@dataclasses.dataclass
class Scores:
    """Computed metrics, metrics that could not be computed (with the reason), provenance."""

    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    unavailable: dict[str, str] = dataclasses.field(default_factory=dict)
    libraries: dict[str, str] = dataclasses.field(default_factory=dict)
    # {breakdown name: {group: {metric: value}}}, metrics.json's "breakdowns".
    breakdowns: dict[str, dict[str, dict[str, float]]] = dataclasses.field(default_factory=dict)

    def update(self, other: Scores) -> Scores:
        """Adds ``other`` in place (a name computed anywhere leaves ``unavailable``)."""
        self.metrics.update(other.metrics)
        self.libraries.update(other.libraries)
        for name, groups in other.breakdowns.items():
            merged = self.breakdowns.setdefault(name, {})
            for group, values in groups.items():
                merged.setdefault(group, {}).update(values)
        for name, reason in other.unavailable.items():
            if name not in self.metrics:
                self.unavailable[name] = reason
        for name in self.metrics:
            self.unavailable.pop(name, None)
        return self

    @classmethod
    def missing(cls, names: Sequence[str], reason: str) -> Scores:
        return cls(unavailable={name: reason for name in names})


def as_reference_lists(references: Sequence[str | Sequence[str]]) -> list[list[str]]:
    """Each example's reference(s) as a non-empty list of strings (docs/design.md §8 targets)."""
    out = []
    for i, ref in enumerate(references):
        try:
            refs = [ref] if isinstance(ref, str) else list(ref)
        except TypeError:  # 12, NaN, null: refused below, not a traceback
            refs = []
        if not refs or not all(isinstance(r, str) for r in refs):
            raise ValueError(f"reference {i}: expected a string or a non-empty list of strings")
        out.append(refs)
    return out
