"""The item rubric every score is on: 0 to 3 (LLMEval-Fair (Zhang et al.), "LLMEval-Fair:
a large-scale longitudinal study on robust and fair evaluation of large language models",
§2.3.1 and fig. 11: 3 is a correct answer with a reasonable explanation, 0 a wrong answer
with a wrong explanation). Judges' ratings, matchers' outcomes, reviewers' scores, the
bundle check and every score formula read these bounds from here."""

from __future__ import annotations

MIN_SCORE = 0
"""The lowest item score."""
MAX_SCORE = 3
"""The rubric's maximum item score ``s_max`` (eq. 1)."""
