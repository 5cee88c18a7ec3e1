"""The host fault guard: faults and C++ exceptions in a functor become Python exceptions.

A small runtime library, compiled once (and kept in the disk cache like a kernel), is loaded
into the process with RTLD_GLOBAL before any host kernel, and installs handlers for SIGFPE,
SIGSEGV, SIGBUS and SIGILL that chain to whatever was installed before. Each kernel thread
registers a jump buffer in the runtime's thread-local `jm_fault_jump` while it computes (see
kernels/host.py); a fault there jumps back into the kernel, which returns the signal number
(or -1 for a C++ exception, whose text is kept in the call's own buffer and handed to the calling
thread) instead of ending the process. A fault anywhere else goes to the previous handler, exactly
as before. Code that runs when a kernel library is loaded is checked apart (load_check.py).
"""
from __future__ import annotations

import ctypes
import os
import signal
import tempfile
import threading

from jiter_magic.errors import IntegerDivisionError, KernelFaultError, LaunchError
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

static void jm_on_fault(int sig, siginfo_t* info, void* context) {
  sigjmp_buf* jump = jm_fault_jump;
  if (jump) { jm_fault_jump = 0; siglongjmp(*jump, sig); }
  struct sigaction* old = &jm_previous[sig];
  if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) { old->sa_sigaction(sig, info, context); return; }
  if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
    old->sa_handler(sig); return;
  }
  sigaction(sig, old, 0);  /* the default action: the faulting instruction runs again and ends the process */
}

int jm_install_fault_guard(void) {
  if (jm_installed) return 0;
  const int signals[4] = {SIGFPE, SIGSEGV, SIGBUS, SIGILL};
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = jm_on_fault;
  action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;  /* NODEFER: nothing stays blocked after the jump */
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 4; ++i)
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


def raise_fault(status: int, name: str) -> None:
    """The exception for a kernel's non-zero status: a signal number, or -1 for a C++ exception."""
    runtime = RUNTIME.part(FaultGuard).library
    if status == -1:
        message = runtime.jm_fault_message().decode(errors="replace") if runtime else ""
        raise KernelFaultError(f"{name}: the functor threw a C++ exception: {message or '(no message)'}")
    if status == signal.SIGFPE:
        raise IntegerDivisionError(f"{name}: integer division or remainder by zero in the functor "
                                   "(or the most negative integer divided by -1)")
    what = signal.Signals(status).name if status in signal.Signals._value2member_map_ else f"signal {status}"
    raise KernelFaultError(f"{name}: the functor raised {what} (an invalid memory access or instruction); "
                           "the call was abandoned, and memory the functor wrote through bad pointers may be corrupt")
