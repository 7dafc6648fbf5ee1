"""Evaluation runs the server drives: a model's endpoint taken through sessions by workers."""
