"""The one door to NVML (`pynvml`, from nvidia-ml-py), after nvitop's api/libnvml.py: every probe asks here.

Telemetry, the device facts, naming the local GPUs and GPM all go through one `Nvml` per binding:
- NVML is initialised once, lazily, by the first caller that needs it, within a deadline (a hung driver
  costs that deadline once, never a hang), and the GPUs are named then; it is shut down once, at exit.
- A query answers `default` (None) on an NVML error and never raises for one. A function the binding or
  the driver lacks, and a call NVML says is not supported, are asked once and remembered; a lost GPU is
  not asked again.
- Without the binding, the library or the driver, every caller gets the same one-line `reason`.
Other exceptions (a bug, a binding that is not NVML's) are not NVML's answer: they reach the caller.
"""

from __future__ import annotations

import atexit
import logging
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

INIT_TIMEOUT_S = 10.0  # the longest nvmlInit and naming the GPUs may take before NVML counts as not available
CLOSE_TIMEOUT_S = 2.0  # the longest nvmlShutdown may hold the exit
MEMO_SIZE = 1024  # the most unsupported calls remembered (nvitop's UNKNOWN_FUNCTIONS_CACHE_SIZE)
# What turning a value NVML gave into a number or a name can raise (a bad value, a structure missing a field).
ODD_VALUE = (ArithmeticError, AttributeError, LookupError, TypeError, ValueError)


class _Never(Exception):
    """Stands for an error class the binding does not define: never raised, so never caught."""


@dataclass(frozen=True)
class NvmlGpu:
    """One GPU as NVML named it when it opened: NVML's index (PCI order, not CUDA's), its handle, its name."""

    index: int
    handle: Any
    name: str


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _text(value: Any) -> Any:
    """NVML's bytes as text (older bindings return bytes); anything else as it is."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


class Nvml:
    """NVML through one binding (`lib`: the pynvml module, or a thin fake in tests); see the module's note."""

    def __init__(self, lib: Any, reason: str | None = None) -> None:
        self.lib = lib
        self.reason = reason  # why NVML is not available; None while it is (or has not been opened)
        self._lock = threading.Lock()
        self._opened = threading.Event()  # set once opening is over: open, failed, or given up
        self._opener: threading.Thread | None = None
        self._gave_up = False
        self._inited = False  # nvmlInit returned: one nvmlShutdown is owed
        self._shut = False
        self._gpus: tuple[NvmlGpu, ...] = ()
        self._missing: set[str] = set()  # functions the binding or the driver lacks
        self._unsupported: set[tuple[Any, ...]] = set()  # (function, *args) NVML said it does not support
        self.lost: list[int] = []  # GPUs that fell off the bus, in the order found
        self._calls = 0  # calls into NVML that have not returned (a hung one forbids the shutdown)
        if lib is None:
            self._opened.set()
        else:
            self._error = getattr(lib, "NVMLError", _Never)
            self._not_found = (getattr(lib, "NVMLError_FunctionNotFound", _Never),
                               getattr(lib, "NVMLLibraryMismatchError", _Never))  # an unversioned call, too new
            self._not_supported = getattr(lib, "NVMLError_NotSupported", _Never)
            self._gpu_lost = getattr(lib, "NVMLError_GpuIsLost", _Never)

    # -- opening and closing ---------------------------------------------------------

    def open(self, timeout_s: float = INIT_TIMEOUT_S) -> bool:
        """Initialise NVML and name the GPUs, once for every caller; False (and `reason` why) when NVML is not
        available or did not answer within `timeout_s`, after which it counts as not available for good."""
        with self._lock:
            if self._opener is None and not self._opened.is_set():
                self._opener = threading.Thread(target=self._init, name="rooftop-nvml-init", daemon=True)
                self._opener.start()
        if not self._opened.wait(timeout_s):
            with self._lock:
                if not self._opened.is_set():
                    self._gave_up = True
                    self.reason = f"NVML not available: it did not answer within {timeout_s:g} s"
                    self._opened.set()
        return self.available

    def _init(self) -> None:
        gpus: tuple[NvmlGpu, ...] = ()
        reason = None
        inited = False
        try:
            self.lib.nvmlInit()
            inited = True
            gpus = self._name_gpus()
        # Broad on purpose: this is the binding's code on a thread of its own, where no caller can catch.
        # nvidia-ml-py raises NVMLError (LibraryNotFound, DriverNotLoaded, …) or AttributeError (a `pynvml`
        # without nvmlInit); anything else escaping would leave every caller waiting out the deadline.
        except Exception as exc:
            reason = f"NVML not available: {_one_line(exc)}"
            gpus = ()
        with self._lock:
            self._inited = inited
            if inited:
                _opened_doors.append(self)
            if not self._gave_up:  # what a late answer finds is not used: the callers were told it is not there
                self._gpus, self.reason = gpus, reason
            self._opened.set()

    def _name_gpus(self) -> tuple[NvmlGpu, ...]:
        """Every GPU NVML counts that it can name; one it cannot (lost, an odd name) is left out, said once."""
        lib = self.lib
        gpus = []
        for i in range(int(lib.nvmlDeviceGetCount())):
            try:
                handle = lib.nvmlDeviceGetHandleByIndex(i)
                gpus.append(NvmlGpu(i, handle, str(_text(lib.nvmlDeviceGetName(handle)))))
            except (self._error, UnicodeDecodeError) as exc:
                log.info("NVML could not name GPU %d: %s", i, _one_line(exc))
        return tuple(gpus)

    @property
    def available(self) -> bool:
        """Opened, with at least one GPU named."""
        return self._opened.is_set() and bool(self._gpus)

    @property
    def gpus(self) -> tuple[NvmlGpu, ...]:
        """The GPUs NVML named, opening it first if need be; () when it is not available."""
        self.open()
        return self._gpus

    def gpu(self, index: int) -> NvmlGpu | None:
        """The GPU of NVML's `index`, or None."""
        return next((g for g in self.gpus if g.index == index), None)

    def shutdown(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """nvmlShutdown, once, for the nvmlInit that opened the door (run at exit). Left undone while a call
        has not returned (a hung driver), and on a daemon thread bounded by `timeout_s`, so the exit never hangs."""
        with self._lock:
            if not self._inited or self._shut:
                return
            if self._calls:
                log.info("NVML left without shutdown: %d call(s) have not returned", self._calls)
                return
            self._shut = True
            self._gpus = ()
        t = threading.Thread(target=self._shutdown, name="rooftop-nvml-close", daemon=True)
        t.start()
        t.join(timeout_s)

    def _shutdown(self) -> None:
        try:
            self.lib.nvmlShutdown()
        except self._error as exc:
            log.debug("nvmlShutdown: %s", _one_line(exc))

    # -- asking ----------------------------------------------------------------------

    def missing(self, fn: str) -> bool:
        """Whether `fn` was found missing from the binding or the driver."""
        return fn in self._missing

    def query(self, fn: str, *args: Any, gpu: int | None = None, default: Any = None) -> Any:
        """NVML's `fn(*args)` (bytes as text), opening NVML first if need be; `default` on any NVML error.

        `gpu` is the NVML index the call is about: if NVML says that GPU is lost, it is not asked again.
        A function found missing, and a call NVML does not support, are asked once.
        """
        if fn in self._missing or (gpu is not None and gpu in self.lost) or not self.open():
            return default
        key = _memo_key(fn, args)
        if key is not None and key in self._unsupported:
            return default
        call = getattr(self.lib, fn, None)
        if call is None:
            self._lack(fn)
            return default
        with self._lock:
            self._calls += 1
        try:
            return _text(call(*args))
        except self._not_found:
            self._lack(fn)
        except self._not_supported:
            with self._lock:
                if key is not None and len(self._unsupported) < MEMO_SIZE:
                    self._unsupported.add(key)
            log.debug("NVML does not support %s%s: not asked again", fn, "" if gpu is None else f" on GPU {gpu}")
        except self._gpu_lost:
            with self._lock:
                if gpu is not None and gpu not in self.lost:
                    self.lost.append(gpu)
        except (self._error, UnicodeDecodeError):  # another NVML error (Unknown, NoPermission, Timeout, …)
            pass
        finally:
            with self._lock:
                self._calls -= 1
        return default

    def _lack(self, fn: str) -> None:
        with self._lock:
            if fn in self._missing:
                return
            self._missing.add(fn)
        log.info("NVML function %s not available (binding/driver mismatch)", fn)


def _memo_key(fn: str, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """(fn, *args) when every argument can be a key (handles, ints); None when one cannot (not remembered)."""
    key = (fn, *args)
    try:
        hash(key)
    except TypeError:
        return None
    return key


_doors: dict[int, Nvml] = {}  # id(binding) → its door; the door holds the binding, so the id is not reused
_doors_lock = threading.Lock()
_opened_doors: list[Nvml] = []  # the doors whose nvmlInit returned: shut down at exit


def door(lib: Any = None) -> Nvml:
    """The door to NVML through `lib` (tests pass a thin fake); by default through pynvml, imported now.
    One door per binding, so every caller shares one init, one memo and one reason."""
    if lib is None:
        try:
            # deferred: pynvml (~18 ms), only when NVML is first opened
            import pynvml
        except ImportError as exc:
            return Nvml(None, reason=f"NVML not available: {_one_line(exc)}")
        lib = pynvml
    with _doors_lock:
        found = _doors.get(id(lib))
        if found is None:
            found = _doors[id(lib)] = Nvml(lib)
    return found


@atexit.register
def _shutdown_all() -> None:
    for d in list(_opened_doors):
        d.shutdown()
