"""Success as a table of checked criteria: each row PASS, FAIL or n/a, with its evidence."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .tables import table

PASS, FAIL, NA = "PASS", "FAIL", "n/a"


@dataclass
class Criterion:
    name: str
    status: str  # PASS | FAIL | n/a
    evidence: str = ""

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass
class Criteria:
    title: str
    items: list[Criterion] = field(default_factory=list)

    def add(self, name: str, ok: bool | None, evidence: str = "", na_reason: str | None = None) -> Criterion:
        if ok is None:
            c = Criterion(name, NA, na_reason or evidence)
        else:
            c = Criterion(name, PASS if ok else FAIL, evidence)
        self.items.append(c)
        return c

    @property
    def ok(self) -> bool:
        return not any(c.failed for c in self.items)

    @property
    def failed(self) -> list[Criterion]:
        return [c for c in self.items if c.failed]

    def show(self) -> None:
        table(
            [(c.status, c.name, c.evidence) for c in self.items],
            ["result", "criterion", "evidence"],
            title=self.title,
            max_width=90,
        )
        n_pass = sum(c.status == PASS for c in self.items)
        n_na = sum(c.status == NA for c in self.items)
        print(f"{n_pass} passed, {len(self.failed)} failed, {n_na} not applicable")

    def raise_if_failed(self) -> None:
        if self.failed:
            raise AssertionError("failed criteria: " + "; ".join(f"{c.name} ({c.evidence})" for c in self.failed))

    def to_json(self) -> str:
        return json.dumps({"title": self.title, "ok": self.ok, "items": [asdict(c) for c in self.items]}, indent=2)
