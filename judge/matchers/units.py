"""The units :func:`judge.matchers.numbers.match_number` knows, and how to convert them.

:data:`UNITS` maps a unit as written (SI symbols and Chinese names) to ``(dimension,
factor, offset)``: a value ``v`` in that unit is ``v * factor + offset`` in the
dimension's base unit, so two quantities are comparable only within one dimension.
:data:`UNIT_PATTERN` is the regex alternation that recognises a unit after a number
(longest first, case-sensitive; an ASCII unit must not run on into a letter).
"""

from __future__ import annotations

import math
import re

_LENGTH, _TIME, _MASS = "length", "time", "mass"
UNITS: dict[str, tuple[str, float, float]] = {
    # unit: (dimension, factor to the SI unit, offset added after scaling)
    "m": (_LENGTH, 1.0, 0.0), "cm": (_LENGTH, 1e-2, 0.0), "mm": (_LENGTH, 1e-3, 0.0),
    "dm": (_LENGTH, 0.1, 0.0), "km": (_LENGTH, 1e3, 0.0), "μm": (_LENGTH, 1e-6, 0.0),
    "nm": (_LENGTH, 1e-9, 0.0), "米": (_LENGTH, 1.0, 0.0), "厘米": (_LENGTH, 1e-2, 0.0),
    "毫米": (_LENGTH, 1e-3, 0.0), "分米": (_LENGTH, 0.1, 0.0), "千米": (_LENGTH, 1e3, 0.0),
    "公里": (_LENGTH, 1e3, 0.0), "微米": (_LENGTH, 1e-6, 0.0), "纳米": (_LENGTH, 1e-9, 0.0),
    "s": (_TIME, 1.0, 0.0), "ms": (_TIME, 1e-3, 0.0), "μs": (_TIME, 1e-6, 0.0),
    "min": (_TIME, 60.0, 0.0), "h": (_TIME, 3600.0, 0.0), "hr": (_TIME, 3600.0, 0.0),
    "秒": (_TIME, 1.0, 0.0), "毫秒": (_TIME, 1e-3, 0.0), "分钟": (_TIME, 60.0, 0.0),
    "小时": (_TIME, 3600.0, 0.0),
    "kg": (_MASS, 1.0, 0.0), "g": (_MASS, 1e-3, 0.0), "mg": (_MASS, 1e-6, 0.0),
    "千克": (_MASS, 1.0, 0.0), "公斤": (_MASS, 1.0, 0.0), "克": (_MASS, 1e-3, 0.0),
    "毫克": (_MASS, 1e-6, 0.0), "吨": (_MASS, 1e3, 0.0),
    "N": ("force", 1.0, 0.0), "kN": ("force", 1e3, 0.0), "牛": ("force", 1.0, 0.0),
    "牛顿": ("force", 1.0, 0.0), "千牛": ("force", 1e3, 0.0),
    "J": ("energy", 1.0, 0.0), "kJ": ("energy", 1e3, 0.0), "MJ": ("energy", 1e6, 0.0),
    "kWh": ("energy", 3.6e6, 0.0), "kW·h": ("energy", 3.6e6, 0.0),
    "eV": ("energy", 1.602176634e-19, 0.0), "焦": ("energy", 1.0, 0.0),
    "焦耳": ("energy", 1.0, 0.0), "千焦": ("energy", 1e3, 0.0),
    "W": ("power", 1.0, 0.0), "kW": ("power", 1e3, 0.0), "MW": ("power", 1e6, 0.0),
    "瓦": ("power", 1.0, 0.0), "瓦特": ("power", 1.0, 0.0), "千瓦": ("power", 1e3, 0.0),
    "V": ("voltage", 1.0, 0.0), "kV": ("voltage", 1e3, 0.0), "mV": ("voltage", 1e-3, 0.0),
    "伏": ("voltage", 1.0, 0.0), "伏特": ("voltage", 1.0, 0.0), "千伏": ("voltage", 1e3, 0.0),
    "A": ("current", 1.0, 0.0), "mA": ("current", 1e-3, 0.0), "μA": ("current", 1e-6, 0.0),
    "安": ("current", 1.0, 0.0), "安培": ("current", 1.0, 0.0), "毫安": ("current", 1e-3, 0.0),
    "Ω": ("resistance", 1.0, 0.0), "kΩ": ("resistance", 1e3, 0.0),
    "MΩ": ("resistance", 1e6, 0.0), "ohm": ("resistance", 1.0, 0.0),
    "ohms": ("resistance", 1.0, 0.0), "欧": ("resistance", 1.0, 0.0),
    "欧姆": ("resistance", 1.0, 0.0), "千欧": ("resistance", 1e3, 0.0),
    "mol": ("amount", 1.0, 0.0), "mmol": ("amount", 1e-3, 0.0), "摩": ("amount", 1.0, 0.0),
    "摩尔": ("amount", 1.0, 0.0),
    "L": ("volume", 1.0, 0.0), "mL": ("volume", 1e-3, 0.0), "ml": ("volume", 1e-3, 0.0),
    "m3": ("volume", 1e3, 0.0), "dm3": ("volume", 1.0, 0.0), "cm3": ("volume", 1e-3, 0.0),
    "升": ("volume", 1.0, 0.0), "毫升": ("volume", 1e-3, 0.0),
    "m/s": ("velocity", 1.0, 0.0), "m·s-1": ("velocity", 1.0, 0.0),
    "km/h": ("velocity", 1 / 3.6, 0.0), "km/s": ("velocity", 1e3, 0.0),
    "cm/s": ("velocity", 1e-2, 0.0), "米/秒": ("velocity", 1.0, 0.0),
    "米每秒": ("velocity", 1.0, 0.0), "千米/时": ("velocity", 1 / 3.6, 0.0),
    "千米/小时": ("velocity", 1 / 3.6, 0.0), "千米每小时": ("velocity", 1 / 3.6, 0.0),
    "m/s2": ("acceleration", 1.0, 0.0), "m·s-2": ("acceleration", 1.0, 0.0),
    "cm/s2": ("acceleration", 1e-2, 0.0), "米/秒2": ("acceleration", 1.0, 0.0),
    "°C": ("temperature", 1.0, 273.15), "摄氏度": ("temperature", 1.0, 273.15),
    "K": ("temperature", 1.0, 0.0), "开尔文": ("temperature", 1.0, 0.0),
    "°": ("angle", math.pi / 180, 0.0), "rad": ("angle", 1.0, 0.0),
    "弧度": ("angle", 1.0, 0.0),
    "%": ("percent", 1.0, 0.0), "percent": ("percent", 1.0, 0.0),
    "元": ("currency", 1.0, 0.0), "万元": ("currency", 1e4, 0.0),
    "亿元": ("currency", 1e8, 0.0),
    "Pa": ("pressure", 1.0, 0.0), "kPa": ("pressure", 1e3, 0.0),
    "MPa": ("pressure", 1e6, 0.0), "帕": ("pressure", 1.0, 0.0),
    "千帕": ("pressure", 1e3, 0.0),
    "Hz": ("frequency", 1.0, 0.0), "kHz": ("frequency", 1e3, 0.0),
    "MHz": ("frequency", 1e6, 0.0), "赫兹": ("frequency", 1.0, 0.0),
    "kg/m3": ("density", 1.0, 0.0), "g/cm3": ("density", 1e3, 0.0),
    "g/mL": ("density", 1e3, 0.0),
    "mol/L": ("concentration", 1.0, 0.0), "mmol/L": ("concentration", 1e-3, 0.0),
}  # fmt: skip
"""Units :func:`match_number` knows: ``unit -> (dimension, factor, offset)``.

A value ``v`` in ``unit`` is ``v * factor + offset`` in the dimension's base unit (only the
temperatures have an offset). Units are matched case-sensitively right after a number
(``mA`` is not ``MA``); ASCII units must not run on into a letter (``5 min`` is minutes,
``5 so`` has no unit)."""


def _unit_alternative(unit: str) -> str:
    escaped = re.escape(unit)
    return escaped + r"(?![A-Za-z])" if unit[-1].isascii() and unit[-1].isalpha() else escaped


UNIT_PATTERN = "|".join(_unit_alternative(unit) for unit in sorted(UNITS, key=len, reverse=True))
