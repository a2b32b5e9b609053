"""Argument types shared by the project's command-line tools (bwn-send, bwn-recv,
bwn-link): numbers with bounds, and a parser whose errors are one line with exit
status 2."""
from __future__ import annotations

import argparse
import math
from typing import Callable, NoReturn, Optional


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``PROG: error: ...`` and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def number(kind: type = float, low: Optional[float] = None, high: Optional[float] = None,
           low_open: bool = False, base: int = 10) -> Callable[[str], float]:
    """An argparse `type` accepting a finite `kind` (int or float) within the bounds:
    [low, high], or (low, high] with `low_open`. Error messages name the bound."""
    def parse(text: str):
        try:
            value = int(text, base) if kind is int else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        too_low = low is not None and (value <= low if low_open else value < low)
        if too_low or (high is not None and value > high):
            if low == 0 and high is None:
                rule = "must be positive" if low_open else "must not be negative"
            elif high is None:
                rule = f"must be {'more than' if low_open else 'at least'} {_show(low)}"
            else:
                rule = f"must be {_show(low)}..{_show(high)}"
            raise argparse.ArgumentTypeError(f"{rule}, got {text!r}")
        return value
    return parse


def _show(bound: Optional[float]) -> str:
    return str(int(bound)) if bound is not None and float(bound).is_integer() else f"{bound:g}"
