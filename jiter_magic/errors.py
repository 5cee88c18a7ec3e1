"""Every error jiter_magic raises, in one place.

Each class also inherits the standard exception type a user would naturally catch,
so `except ValueError` keeps working for code written against torch's jiterator.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable


def device_name(device: int) -> str:
    """'the CPU' or 'cuda:N', as error messages and the notebook's lines name a device."""
    return "the CPU" if device < 0 else f"cuda:{device}"


def mixed_inputs(libraries: tuple[str, str], devices: tuple[int, int], what: str = "inputs") -> DeviceError:
    """What a call (or a benchmark: `what`) raises on arrays of another library than the first
    array's, else on another device: the first array's place, then the other's."""
    if libraries[0] != libraries[1]:
        return DeviceError(f"{what} mix {libraries[0]} and {libraries[1]} arrays; convert them to one library")
    return DeviceError(f"{what} live on different devices ({device_name(devices[0])} and "
                       f"{device_name(devices[1])}); move them to one device")


class JiterError(Exception):
    """Base class of every error raised by jiter_magic."""


class ParseError(JiterError, ValueError):
    """The code string holds no usable C++ function definition."""


class BindError(JiterError, TypeError):
    """kwargs, inputs or outputs do not match the entry function's parameters."""


class ArgumentTypeError(JiterError, TypeError):
    """An argument of the wrong type, such as a code string that is not a str."""


class InvalidArgumentError(JiterError, ValueError):
    """An argument whose value cannot be used: an unknown backend or path name, a read-only or
    lazy-view `out=` array."""


class UnknownKwargError(JiterError, KeyError):
    """A call names a keyword argument the function did not declare (a KeyError, as torch raises)."""

    @classmethod
    def naming(cls, name: str, declared: Iterable[str]) -> UnknownKwargError:
        """The error for keyword `name`, listing the declared ones and suggesting the closest."""
        names = list(declared)
        message = f"{name} is not declared in function definition (declared: {names})"
        close = difflib.get_close_matches(name, names, n=1)
        return cls(f"{message}; did you mean {close[0]!r}?" if close else message)

    def __str__(self) -> str:
        # KeyError's __str__ is repr(key), which would print the message in quotes; it is a message.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class DimensionError(JiterError, IndexError):
    """A reduction's `dim=` out of range for its input (an IndexError, as torch raises)."""


class ScalarOverflowError(JiterError, OverflowError):
    """A Python integer does not fit the C type it is passed as."""


class UnsupportedArrayError(JiterError, TypeError):
    """An array the kernels cannot read safely: a tensor subclass with its own dispatch (other than
    DTensor, FakeTensor and FunctionalTensor, which run a call their own way), a sparse, nested or
    quantized tensor, a masked array, a view reaching past its storage."""


class GradientError(JiterError, RuntimeError):
    """Autograd asked for what a jitted function cannot give: a backward through it, `out=` with
    arguments that require grad, or an inference tensor as `out=` outside inference mode (as torch
    refuses both)."""

    @classmethod
    def no_backward(cls, name: str, takes: str, when: str = "") -> GradientError:
        """What a function without `def_backward` raises where autograd needs its gradient: `takes`
        says what its kind's backward functor takes and writes, `when` why it is needed now."""
        return cls(f"{name} has no backward{when}: give it one with {name}.def_backward(code_string) ({takes}), "
                   "or call it under torch.no_grad()")


class DTypeError(JiterError, TypeError):
    """An unsupported dtype, or a cast that the safe-casting rules forbid."""


class ShapeError(JiterError, ValueError):
    """Shapes that do not broadcast, or an `out=` array of the wrong shape."""


class DeviceError(JiterError, RuntimeError):
    """Inputs on different devices, or on a device no backend can run on."""


class CompileError(JiterError, RuntimeError):
    """The compiler rejected the generated source; the message is its log, mapped to the user's lines."""

    def __init__(self, message: str, log: str = "", source: str = ""):
        super().__init__(message)
        self.log = log
        self.source = source


class KernelFaultError(JiterError, RuntimeError):
    """A functor running on the CPU raised a signal (a bad memory access, an illegal instruction, a
    breakpoint trap, a floating-point trap it enabled) or threw a C++ exception; the call is
    abandoned and the process goes on."""


class IntegerDivisionError(JiterError, ZeroDivisionError, RuntimeError):
    """A functor running on the CPU divided an integer by zero (or the most negative integer by -1);
    torch eager raises RuntimeError("ZeroDivisionError") there, so this is both."""


class ToolchainError(JiterError, RuntimeError):
    """A compiler or runtime component needed for the requested backend is missing."""


class SettingWarning(UserWarning):
    """A `JITER_MAGIC_*` environment variable has a value that is not valid; its default is used."""


class LaunchError(JiterError, RuntimeError):
    """The kernel could not be loaded or launched."""
