"""What is in flight while a run is live (``live.json``, rewritten by the driver as it changes; read by
``status``)."""

from __future__ import annotations

from pydantic import BaseModel

from mstar_ray.results import EvalProgress


class InFlight(BaseModel):
    """How far one evaluation in flight has got, as its evaluator last reported (also in ``live.json``)."""

    candidate: str
    purpose: str  # search | confirm | test
    texts_done: int
    texts_total: int
    items_done: int
    items_total: int
    elapsed_s: float
    eta_s: float | None

    @classmethod
    def of(cls, candidate: str, purpose: str, progress: EvalProgress) -> InFlight:
        return cls(candidate=candidate, purpose=purpose, texts_done=progress.texts_done,
                   texts_total=progress.texts_total, items_done=progress.items_done,
                   items_total=progress.items_total, elapsed_s=progress.write_s + progress.read_s,
                   eta_s=progress.eta_s())

    def describe(self) -> str:
        eta = "-" if self.eta_s is None else f"{self.eta_s / 60:.1f} min"
        return (f"{self.purpose} {self.candidate[:8]}: texts {self.texts_done}/{self.texts_total}, questions "
                f"{self.items_done}/{self.items_total}, ETA {eta}")
