"""A pseudo-terminal for a test's program, as a shell gives one: what the program sends it is read as it comes (a
terminal nobody reads fills up and blocks the program), and the terminal can hang up, as when sshd ends the
session."""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import termios
import threading
import types


class Terminal:
    """`slave`: the fd to give the program (stdin, stdout or stderr); `started()` once it is running; `screen`:
    the bytes sent so far; `hang_up()` closes the terminal. A context manager: it hangs up at the end."""

    def __init__(self, rows: int = 24, cols: int = 80) -> None:
        self._master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.screen = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)

    def _drain(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self._master, 65536):
                self.screen.extend(chunk)

    def started(self) -> None:
        """The program has the terminal: this side lets go of its end, and reads what is sent."""
        os.close(self.slave)
        self._reader.start()

    def hang_up(self) -> None:
        if self._master >= 0:
            os.close(self._master)
            self._master = -1

    def text(self) -> str:
        return self.screen.decode(errors="replace")

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: types.TracebackType | None) -> None:
        if self._reader.is_alive():
            self._reader.join(timeout=10)  # the program has ended: the rest of its output is read first
        self.hang_up()
