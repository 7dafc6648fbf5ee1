"""Contamination checks: has a model seen the items it is evaluated on?

* :mod:`~judge.contamination.replay`: fill-in replay. The model continues the visible
  beginning of an item; a near-verbatim continuation means it has memorised the item.
* :mod:`~judge.contamination.generalisation_gap`: the gap between a model's score on the
  public item set and on a private anchor set, in excess of the median gap of all models.
* :mod:`~judge.contamination.arguments`: the argument checks both share.
"""
