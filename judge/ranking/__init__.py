"""Ranking, leaderboard and capability diagnostics.

Pure computations over scores, no database and no network. One concept per module:

* :mod:`~judge.ranking.scores`: absolute score (LLMEval-Fair eq. 1), per-discipline scores
  on a 10-point scale, relative-to-anchor scores (eq. 2);
* :mod:`~judge.ranking.diagnostics`: the ReLE diagnostics (§3.5, §5-6), one module per
  statistic: anisotropy index, Rank Stability Amplitude over weighting schemes (with
  ``RELE_SCHEMES``), capability inconsistency, and all three at once (``diagnose``);
* :mod:`~judge.ranking.score_table`: a model-by-dimension score table read from CSV/TSV
  text (``proctor analyze``);
* :mod:`~judge.ranking.stability`: several sessions per model, bootstrap intervals and
  tie groups;
* :mod:`~judge.ranking.pairwise`: Elo (LLMEval-Fair app. D) and Bradley-Terry baselines;
* :mod:`~judge.ranking.static_compare`: agreement with an imported static leaderboard.
"""
