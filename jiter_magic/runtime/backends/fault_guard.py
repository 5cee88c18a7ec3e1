"""The host fault guard: faults and C++ exceptions in a functor become Python exceptions.

A small runtime library, compiled once (and kept in the disk cache like a kernel), is loaded
into the process with RTLD_GLOBAL before any host kernel, and installs handlers for SIGFPE,
SIGSEGV, SIGBUS, SIGILL and SIGTRAP that chain to whatever was installed before. Each kernel
thread registers a jump buffer in the runtime's thread-local `jm_fault_jump` while it computes
(kernels/host_guard.py: the calling thread for the whole call, each thread of a parallel region
for its share, the inner guard putting the outer one's target back); a fault there jumps back into
the kernel, which returns the signal number (for a SIGFPE, with its kind above it: an integer
division, or which floating-point trap), -1 for a C++ exception, whose text is kept in the call's
own buffer and handed to the calling thread, or NO_MEMORY where its scratch buffers could not
be allocated, instead of ending the process. A fault anywhere else goes to the previous handler,
exactly as before. Code that runs when a kernel library is loaded is checked apart (load_check.py).
"""
from __future__ import annotations

import ctypes
import os
import signal
import tempfile
import threading

from jiter_magic.errors import IntegerDivisionError, KernelFaultError, LaunchError
from jiter_magic.kernels.host_guard import NO_MEMORY
from jiter_magic.state import RUNTIME

RUNTIME_SOURCE = r"""
#include <signal.h>
#include <setjmp.h>
#include <string.h>
extern "C" {
__thread sigjmp_buf* volatile jm_fault_jump = 0;  /* volatile: the kernel's store must happen */
static struct sigaction jm_previous[65];
static int jm_installed = 0;
/* The text of a C++ exception, for the thread that called the kernel: written once the kernel's
   threads are done (jm_fault_report), read by that same thread through ctypes (jm_fault_message). */
static __thread char jm_message[512];

/* What a SIGFPE was, above the signal number of the status: 0 for an integer division (x86 raises
   FPE_INTDIV for a zero divisor and for INT_MIN / -1), else the floating-point trap a functor enabled
   (feenableexcept), numbered here because each platform numbers its si_codes its own way. */
static int jm_fpe_kind(int code) {
  switch (code) {
    case FPE_INTDIV: case FPE_INTOVF: return 0;
    case FPE_FLTDIV: return 1;
    case FPE_FLTOVF: return 2;
    case FPE_FLTUND: return 3;
    case FPE_FLTRES: return 4;
    case FPE_FLTINV: return 5;
    case FPE_FLTSUB: return 6;
    default: return 7;
  }
}

static void jm_on_fault(int sig, siginfo_t* info, void* context) {
  sigjmp_buf* jump = jm_fault_jump;
  if (jump) {
    jm_fault_jump = 0;
    siglongjmp(*jump, sig == SIGFPE && info ? sig | (jm_fpe_kind(info->si_code) << 8) : sig);
  }
  struct sigaction* old = &jm_previous[sig];
  if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) { old->sa_sigaction(sig, info, context); return; }
  if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
    old->sa_handler(sig); return;
  }
  /* A faulting instruction runs again once this returns; a trap (int3, past which the thread already
     is) or a signal someone sent (kill) does not happen again, so it is raised anew. */
  const int again = sig == SIGTRAP || !info || info->si_code <= 0;
  if (old->sa_handler == SIG_IGN && again) return;  /* ignored before: still ignored, the guard stays */
  sigaction(sig, old, 0);  /* the previous action (the default: the end of the process, with its report) */
  if (again) raise(sig);
}

int jm_install_fault_guard(void) {
  if (jm_installed) return 0;
  const int signals[5] = {SIGFPE, SIGSEGV, SIGBUS, SIGILL, SIGTRAP};
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = jm_on_fault;
  action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;  /* NODEFER: nothing stays blocked after the jump */
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 5; ++i)
    if (sigaction(signals[i], &action, &jm_previous[signals[i]]) != 0) return -1;
  jm_installed = 1;
  return 0;
}

/* A kernel thread's exception text, kept in the call's own buffer: the first thread to throw wins,
   so concurrent calls never mix their messages. */
void jm_fault_note(char* text, int* taken, const char* what) {
  if (!__sync_lock_test_and_set(taken, 1)) {
    strncpy(text, what ? what : "", 511);
    text[511] = 0;
  }
}

void jm_fault_report(const char* text) { strncpy(jm_message, text, sizeof jm_message - 1); }

const char* jm_fault_message(void) { return jm_message; }
}
"""

class FaultGuard:
    """The runtime library with the fault handlers, loaded once a process: a part of `RUNTIME`."""

    def __init__(self) -> None:
        self.library: ctypes.CDLL | None = None
        self.binary = b""
        self._lock = threading.Lock()

    def ensure(self, compiler) -> bytes:
        """Load the library (once) where later kernels find it, and install the handlers; returns
        its binary (a library of the same build with no initializers: see load_check.py)."""
        with self._lock:
            if self.library is None:
                fd, path = tempfile.mkstemp(prefix="jiter_magic-guard-", suffix=".so")
                binary = _binary(compiler)
                try:
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(binary)
                    library = ctypes.CDLL(path, mode=os.RTLD_GLOBAL)
                except OSError as exc:
                    raise LaunchError(f"could not load jiter_magic's host fault guard: {exc}") from exc
                finally:
                    os.unlink(path)
                library.jm_fault_message.restype = ctypes.c_char_p
                if library.jm_install_fault_guard() != 0:
                    raise LaunchError("could not install jiter_magic's host fault handlers (sigaction failed)")
                self.library, self.binary = library, binary
            return self.binary

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()


def _binary(compiler) -> bytes:
    """The runtime's shared library: from the disk cache, else compiled and stored."""
    from jiter_magic.cache.disk import disk_cache
    from jiter_magic.cache.entry import cache_key

    options = compiler.options()
    key = cache_key(RUNTIME_SOURCE, options, compiler.identity)
    disk = disk_cache()
    binary = disk.get("cpu", key)
    if binary is None:
        binary = compiler.compile(RUNTIME_SOURCE, "jm_fault_guard", options).binary
        disk.put("cpu", key, binary)
    return binary


def ensure_runtime(compiler) -> bytes:
    """The fault guard's binary, loaded and installed in this process first where needed."""
    return RUNTIME.part(FaultGuard).ensure(compiler)


# The floating-point traps a SIGFPE status names above its signal number (jm_fpe_kind).
FP_TRAPS = {1: "floating-point division by zero", 2: "floating-point overflow", 3: "floating-point underflow",
            4: "inexact floating-point result", 5: "invalid floating-point operation",
            6: "floating-point subscript out of range", 7: "floating-point exception of an unknown kind"}


def raise_fault(status: int, name: str) -> None:
    """The exception for a kernel's non-zero status: a signal number (a SIGFPE's kind above it: see
    jm_fpe_kind), -1 for a C++ exception, or NO_MEMORY."""
    runtime = RUNTIME.part(FaultGuard).library
    if status == NO_MEMORY:
        raise LaunchError(f"{name}: the host kernel could not allocate its scratch buffers (tiles, the threads' "
                          "partials): out of memory")
    if status == -1:
        message = runtime.jm_fault_message().decode(errors="replace") if runtime else ""
        raise KernelFaultError(f"{name}: the functor threw a C++ exception: {message or '(no message)'}")
    number, kind = status & 0xFF, status >> 8
    if number == signal.SIGFPE and kind == 0:
        raise IntegerDivisionError(f"{name}: integer division or remainder by zero in the functor "
                                   "(or the most negative integer divided by -1)")
    if number == signal.SIGFPE:
        trap = FP_TRAPS.get(kind, FP_TRAPS[7])
        raise KernelFaultError(f"{name}: the functor raised SIGFPE ({trap}) with that trap enabled "
                               "(feenableexcept); the call was abandoned and the thread's floating-point "
                               "environment restored")
    if number == signal.SIGTRAP:
        raise KernelFaultError(f"{name}: the functor raised SIGTRAP (a breakpoint trap such as int3); "
                               "the call was abandoned")
    what = signal.Signals(number).name if number in signal.Signals._value2member_map_ else f"signal {number}"
    raise KernelFaultError(f"{name}: the functor raised {what} (an invalid memory access or instruction); "
                           "the call was abandoned, and memory the functor wrote through bad pointers may be corrupt")
