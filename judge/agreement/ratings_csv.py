"""Ratings from a CSV file: :func:`read_ratings_csv`.

Columns ``answer_id``, ``rater`` and ``score`` are required, ``model`` and
``model_family`` optional. Every problem in the file is collected and raised together as
an :class:`AgreementInputError` whose lines read ``file:line: field: what is wrong``.
"""

from __future__ import annotations

import os
from collections import Counter

from bank.formats.input_problems import InputError, InputProblem, numbered_rows, read_text
from judge.agreement.ratings import Rating

REQUIRED_COLUMNS: tuple[str, ...] = ("answer_id", "rater", "score")
OPTIONAL_COLUMNS: tuple[str, ...] = ("model", "model_family")


class AgreementInputError(InputError):
    """A ratings file that cannot be used; ``errors`` lists every problem found."""


def read_ratings_csv(path: str | os.PathLike[str], *, reference: str = "human") -> list[Rating]:
    """Read ratings from a CSV file with a header row.

    Columns ``answer_id``, ``rater`` and ``score`` (an integer 0-3) are required;
    ``model`` and ``model_family`` are optional (empty means unknown); other columns are
    ignored. Values are stripped of surrounding blanks; blank lines are skipped; a UTF-8
    byte-order mark is allowed. A rating repeated with the same score is kept once.

    Parameters
    ----------
    path : str or os.PathLike
        The file; messages name it as given.
    reference : str
        The reference rater, which must score at least one answer.

    Returns
    -------
    list of Rating
        In file order.

    Raises
    ------
    AgreementInputError
        With every problem found, each ``file:line: field: what is wrong``: an empty file,
        a missing required column, a bad row (wrong number of fields, empty
        ``answer_id`` / ``rater``, a score that is not an integer 0-3), a rater scoring
        an answer twice with different scores (both lines named), an answer given two
        different models or families, or a reference rater that scores nothing.
    OSError
        The file cannot be read.
    """
    name, text = read_text(path, AgreementInputError)
    if not text.strip():
        raise AgreementInputError(
            [InputProblem(name, None, "file", "is empty; expected a header answer_id,rater,score")]
        )
    return _RatingsParser(name, reference).parse(text)


class _RatingsParser:
    def __init__(self, path: str, reference: str) -> None:
        self.path = path
        self.reference = reference
        self.problems: list[InputProblem] = []
        self.ratings: list[Rating] = []
        self.raters_seen: set[str] = set()
        self.scored: dict[tuple[str, str], tuple[int, int]] = {}  # (rater, answer) -> line, score
        self.answer_info: dict[tuple[str, str], tuple[int, str]] = {}  # (field, answer) -> line, v

    def problem(self, line: int | None, field: str, message: str) -> None:
        self.problems.append(InputProblem(self.path, line, field, message))

    def parse(self, text: str) -> list[Rating]:
        header: list[str] | None = None
        header_line = 0
        header_ok = False
        for line, row in numbered_rows(text, path=self.path, problems=self.problems):
            if header is None:
                header, header_line = [cell.strip() for cell in row], line
                header_ok = self.check_header(header, line)
                if not header_ok:
                    break
                continue
            self.parse_row(header, row, line)
        if header is None:
            self.problem(None, "file", "is empty; expected a header answer_id,rater,score")
        elif not self.problems and not self.ratings:
            self.problem(header_line, "file", "has a header but no ratings")
        if header_ok and self.raters_seen and self.reference not in self.raters_seen:
            seen = ", ".join(sorted(self.raters_seen)) or "none"
            self.problem(
                None,
                "rater",
                f"the reference rater {self.reference!r} scores no answer (raters: {seen})",
            )
        if self.problems:
            raise AgreementInputError(self.problems)
        return self.ratings

    def check_header(self, header: list[str], line: int) -> bool:
        ok = True
        for column, count in Counter(header).items():
            if count > 1 and column in REQUIRED_COLUMNS + OPTIONAL_COLUMNS:
                self.problem(line, column, f"column appears {count} times in the header")
                ok = False
        for column in REQUIRED_COLUMNS:
            if column not in header:
                self.problem(
                    line, column, f"required column is missing (header: {','.join(header)})"
                )
                ok = False
        return ok

    def parse_row(self, header: list[str], row: list[str], line: int) -> None:
        if len(row) != len(header):
            self.problem(line, "row", f"has {len(row)} fields, the header has {len(header)}")
            return
        values = {column: cell.strip() for column, cell in zip(header, row, strict=True)}
        raw_score = dict(zip(header, row, strict=True))["score"]
        before = len(self.problems)
        answer_id, rater = values["answer_id"], values["rater"]
        if not answer_id:
            self.problem(line, "answer_id", "is empty")
        if rater:
            self.raters_seen.add(rater)
        else:
            self.problem(line, "rater", "is empty")
        score_text = values["score"]
        if score_text not in {"0", "1", "2", "3"}:
            self.problem(line, "score", f"{raw_score!r} is not an integer 0-3")
        if len(self.problems) > before:
            return
        score = int(score_text)
        model = values.get("model") or None
        family = values.get("model_family") or None
        earlier = self.scored.get((rater, answer_id))
        if earlier is not None:
            earlier_line, earlier_score = earlier
            if earlier_score != score:
                self.problem(
                    line,
                    "score",
                    f"rater {rater!r} scored answer {answer_id!r} twice with different "
                    f"scores: {earlier_score} on line {earlier_line}, {score} on line {line}",
                )
            return
        consistent = self.consistent(line, answer_id, "model", model)
        consistent = self.consistent(line, answer_id, "model_family", family) and consistent
        if not consistent:
            return
        self.scored[(rater, answer_id)] = (line, score)
        self.ratings.append(Rating(answer_id, rater, score, model, family))

    def consistent(self, line: int, answer_id: str, field: str, value: str | None) -> bool:
        if value is None:
            return True
        earlier = self.answer_info.setdefault((field, answer_id), (line, value))
        if earlier[1] == value:
            return True
        self.problem(
            line,
            field,
            f"answer {answer_id!r} has {field} {value!r} here but {earlier[1]!r} "
            f"on line {earlier[0]}",
        )
        return False
