"""The HTML report of a leaderboard (``proctor demo``).

One self-contained HTML5 document from the server's leaderboard JSON (the per-model view,
``GET /v1/leaderboard``): no external CSS, scripts, fonts or images. It holds

* a header: title, generation time, judge and prompt version, the anchor of ``R`` and
  whether it was designated, the confidence level, and the run's configuration;
* the leaderboard table: position, tie group, rank range, ``R`` and ``S`` with their
  intervals, sessions, P(beats next), latency and (when known) cost; the rows of one tie
  group are drawn as one block, and the groups of two or more models are named as ones
  the data cannot order;
* two plots as inline SVG: the scores with their intervals as error bars in leaderboard
  order (best at the top), coloured by tie group, and a heatmap of the per-discipline
  scores (10-point scale). The first shows ``R``, or ``S`` for every model when some
  model has no ``R`` (the two are on different scales and never share an axis);
* the ReLE diagnostics and the contamination checks, when the board has them.

The board may be any subset of the fields (vendors see the configured public ones) and any
value may be null: what is missing shows as ``-``. Every string from the board is escaped.
The same board and ``generated_at`` give the same document, byte for byte.

Modules: :mod:`~clients.report.board` reads the board JSON, :mod:`~clients.report.formatting`
turns its values into text, :mod:`~clients.report.plots` draws the SVG plots and
:mod:`~clients.report.document` assembles the sections into the document.
"""

from clients.report.document import render_report, write_report

__all__ = ["render_report", "write_report"]
