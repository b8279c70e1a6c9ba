"""What `handoff chat` prints: text from the model or a tool escaped for the terminal, and the
spinner line under it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TextIO

from agent.display import visible

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def printable(text: str) -> str:
    """Text from the model or a tool as the terminal may print it: line breaks and tabs kept,
    every other control, bidi or invisible character escaped (no cursor moves, no reordering)."""
    return visible(text, keep="\n\t")


@dataclass
class Screen:
    """Text on `out`, with a spinner line under it when `out` is a terminal."""

    out: TextIO
    animated: bool
    status: str = ""
    _frame: int = 0
    _drawn: bool = field(default=False, repr=False)
    # Text written since the last line break: a line to end before another begins.
    _open: bool = field(default=False, repr=False)

    def write(self, text: str) -> None:
        self._erase()
        self.out.write(text)
        self.out.flush()
        if text:
            self._open = not text.endswith("\n")

    def end_line(self) -> None:
        """End the line some text was left on; nothing when there is none."""
        if self._open:
            self.line("")

    def line(self, text: str) -> None:
        self.write(text + "\n")

    def set_status(self, status: str) -> None:
        if status == self.status:
            return
        self.status = status
        if not self.animated:
            self.line(f"  … {status}")

    def tick(self) -> None:
        if self.animated and self.status:
            self._frame = (self._frame + 1) % len(SPINNER)
            self.out.write(f"\r\x1b[2K{SPINNER[self._frame]} {self.status}")
            self.out.flush()
            self._drawn = True

    def _erase(self) -> None:
        if self._drawn:
            self.out.write("\r\x1b[2K")
            self._drawn = False


def progress_text(row: dict[str, Any]) -> str:
    progress = (row.get("metadata") or {}).get("snapshot", {}).get("progress", [])
    marks = {"completed": "done", "error": "failed", "pending": "running"}
    return ", ".join(
        printable(f"{p['name']} {marks.get(p['status'], p['status'])}")
        + (f" ({printable(str(p['note']))})" if p.get("note") else "")
        for p in progress
    )
