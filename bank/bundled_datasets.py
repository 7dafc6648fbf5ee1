"""The data sets bundled with the package (small samples of GAOKAO-Bench and MMLU-Pro that
``proctor demo``, ``proctor bank import --sample`` and the tests import), and where they
are on disk (see ``bank/data/README.md``). Not to be confused with :mod:`bank.sampling`,
which draws the items of a session from the bank."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SAMPLES: dict[str, tuple[str, ...]] = {
    "gaokao_bench": ("data", "gaokao_bench"),
    "mmlu_pro": ("data", "mmlu_pro", "items.jsonl"),
}
"""Sample name -> its path inside the ``bank`` package (a directory or a file)."""


def sample_path(name: str) -> Path:
    """The file-system path of the shipped sample ``name``.

    ``"gaokao_bench"`` is a directory of GAOKAO-Bench files, ``"mmlu_pro"`` an MMLU-Pro
    ``items.jsonl`` file; both can be passed to :func:`bank.formats.read_records`.

    Raises
    ------
    KeyError
        For an unknown name.
    FileNotFoundError
        If the package is installed without its data, or not on a file system.
    """
    try:
        parts = SAMPLES[name]
    except KeyError:
        raise KeyError(f"unknown sample {name!r}; known: {', '.join(sorted(SAMPLES))}") from None
    resource = resources.files("bank").joinpath(*parts)
    path = Path(str(resource))
    if not isinstance(resource, Path) or not path.exists():
        raise FileNotFoundError(f"sample {name!r} is not installed as a file at {resource}")
    return path
