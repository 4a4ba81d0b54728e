"""``transfer.json``: the cross-task transfer matrix (``mstar-ray transfer``), the M* paper's experiment that a
memory evolved for one task does worse on another than the untuned seeds there.

Rows are programs (each run's returned program, then the seeds), columns are tasks, a cell is the program's
score on that task's held-out test items with that task's test texts written, exactly as the run that owns the
column tested its own program. A row's *native* column is the task its run searched on.
"""

from __future__ import annotations

from pydantic import BaseModel


class TransferTask(BaseModel):
    name: str  # the task's name (e.g. locomo/conv-26)
    family: str
    metric: str
    source: str  # the run directory (or config file) the column's task and split come from
    items: int  # held-out test items scored


class TransferProgram(BaseModel):
    label: str  # "best of RUN" or "seed NAME"
    id: str
    native: int | None = None  # index of the column of the task its run searched on and returned it for
    seed: bool = False  # one of the seeds (a run may return a seed unchanged)


class TransferMatrix(BaseModel):
    tasks: list[TransferTask]
    programs: list[TransferProgram]
    scores: list[list[float | None]]  # [program][task]; None: the evaluation could not be run (see errors)
    errors: dict[str, str] = {}  # "row,column" -> why that cell is empty (or scored 0: a contract violation)

    def best_seed(self, column: int) -> float | None:
        seeds = [score for program, row in zip(self.programs, self.scores)
                 if program.seed and (score := row[column]) is not None]
        return max(seeds) if seeds else None

    def transfers(self) -> list[tuple[int, int, float, float]]:
        """(row, column, its score, the best seed's) of every evolved program moved off its native task."""
        moved = []
        for row, program in enumerate(self.programs):
            for column in range(len(self.tasks)):
                score, seed = self.scores[row][column], self.best_seed(column)
                moved_off = program.native is not None and column != program.native and not program.seed
                if moved_off and score is not None and seed is not None:
                    moved.append((row, column, score, seed))
        return moved

    def text(self) -> str:
        """The matrix as a table; * marks a program's native task."""
        width = max([12, *(len(p.label) + 2 for p in self.programs)])
        columns = [max(10, len(t.name) + 2) for t in self.tasks]
        lines = [" " * width + "".join(f"{t.name:>{w}}" for t, w in zip(self.tasks, columns))]
        for row, program in enumerate(self.programs):
            cells = []
            for column, w in enumerate(columns):
                score = self.scores[row][column]
                mark = "*" if program.native == column else " "
                cells.append(f"{'error' if score is None else f'{score:.3f}'}{mark}".rjust(w))
            lines.append(f"{program.label:<{width}}" + "".join(cells))
        lines.append("* the task the program was evolved on; each cell: the test score (" +
                     "; ".join(f"{t.name}: {t.metric}, {t.items} items" for t in self.tasks) + ")")
        moved = self.transfers()
        if moved:
            worse = sum(score < seed for _, _, score, seed in moved)
            lines.append(f"moved to another task, an evolved program scored below that task's best seed in {worse} of "
                         f"{len(moved)} pairs")
        for cell, error in self.errors.items():
            row, column = (int(x) for x in cell.split(","))
            lines.append(f"error: {self.programs[row].label} on {self.tasks[column].name}: {error}")
        return "\n".join(lines)
