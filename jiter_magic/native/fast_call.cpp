// jiter_magic's C-level call path, the extension module jiter_magic.native._fast_call (setup.py
// builds it at install; native/loader.py loads it; optional: without a compiler or Python's headers
// at install the Python path runs instead).
//
// `Kernel` launches one loaded kernel: a CUDA function through the driver's cuLaunchKernel (made
// current in the kernel's own context when the calling thread has another or none), or a host
// kernel `int jm_kernel(const char* args)` with the GIL released. `HotPlan` runs a whole planned
// call of the hot path: it allocates the outputs, writes their and the inputs' pointers into a copy
// of the Args struct packed once at planning (element count, extras, geometry), asks the array
// library for its current stream and launches; what took ~5 us of Python takes well under 2 here.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vectorcall_type.h"

namespace {

typedef int CUresult;
typedef CUresult (*LaunchKernelFn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   void*, void**, void**);
typedef CUresult (*CtxGetCurrentFn)(void**);
typedef CUresult (*CtxSetCurrentFn)(void*);
typedef CUresult (*GetErrorNameFn)(CUresult, const char**);
typedef int (*HostKernelFn)(const char*);

struct Driver {
  LaunchKernelFn launch;
  CtxGetCurrentFn get_current;
  CtxSetCurrentFn set_current;
  GetErrorNameFn error_name;
};
Driver driver = {nullptr, nullptr, nullptr, nullptr};
PyObject* launch_error = nullptr;  // jiter_magic.errors.LaunchError, given by configure()

const Py_ssize_t STACK_ARGS = 1024;  // Args structs up to this size are copied on the stack
const Py_ssize_t MAX_OUTPUTS = 64;

struct Kernel {
  PyObject_HEAD
  int host;  // 1: a host kernel; 0: a CUDA function
  void* function;
  unsigned block[3];
  void* context;  // CUDA: the context the function was loaded in
  PyObject* on_fault;  // host: called with a kernel's non-zero status; raises its exception
  PyObject* name;  // the function's name, for error messages
};

// The launch itself, with the Args struct at `args`; 0, or -1 with an exception set.
int run_kernel(Kernel* kernel, const unsigned grid[3], void* stream, char* args) {
  if (kernel->host) {
    HostKernelFn function = reinterpret_cast<HostKernelFn>(kernel->function);
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = function(args);
    Py_END_ALLOW_THREADS
    if (status == 0) return 0;
    PyObject* raised = PyObject_CallFunction(kernel->on_fault, "i", status);
    Py_XDECREF(raised);
    if (!PyErr_Occurred()) PyErr_Format(launch_error, "%U: the host kernel returned status %d", kernel->name, status);
    return -1;
  }
  void* current = nullptr;
  driver.get_current(&current);
  bool switched = current != kernel->context;
  if (switched) driver.set_current(kernel->context);
  void* params[1] = {args};
  CUresult result = driver.launch(kernel->function, grid[0], grid[1], grid[2], kernel->block[0], kernel->block[1],
                                  kernel->block[2], 0, stream, params, nullptr);
  if (switched) driver.set_current(current);
  if (result == 0) return 0;
  const char* what = nullptr;
  if (driver.error_name(result, &what) != 0 || what == nullptr) what = "an unknown CUDA error";
  PyErr_Format(launch_error, "%U: cuLaunchKernel failed with %s (%d)", kernel->name, what, result);
  return -1;
}

// An aligned buffer of `size` bytes: the stack one when it fits, else one from the heap.
char* args_buffer(Py_ssize_t size, char* stack) {
  if (size <= STACK_ARGS) return stack;
  char* found = static_cast<char*>(PyMem_Malloc(size));
  if (found == nullptr) PyErr_NoMemory();
  return found;
}

int read_grid(PyObject* tuple, unsigned grid[3]) {
  if (!PyArg_ParseTuple(tuple, "III", &grid[0], &grid[1], &grid[2])) return -1;
  return 0;
}

// Kernel(function, host, block, context, on_fault, name)
int Kernel_init(Kernel* self, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"function", "host", "block", "context", "on_fault", "name", nullptr};
  unsigned long long function = 0, context = 0;
  int host = 0;
  PyObject* block = nullptr;
  PyObject* on_fault = nullptr;
  PyObject* name = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KpOKOU", const_cast<char**>(names), &function, &host, &block,
                                   &context, &on_fault, &name))
    return -1;
  if (!PyTuple_Check(block) || read_grid(block, self->block) < 0) return -1;
  if (!host && driver.launch == nullptr) {
    PyErr_SetString(launch_error, "the fast call path has no CUDA driver (configure() was not given one)");
    return -1;
  }
  if (function == 0 || (host && on_fault == Py_None)) {
    PyErr_SetString(PyExc_ValueError, "a Kernel needs a function address (and, for a host kernel, on_fault)");
    return -1;
  }
  self->host = host;
  self->function = reinterpret_cast<void*>(static_cast<uintptr_t>(function));
  self->context = reinterpret_cast<void*>(static_cast<uintptr_t>(context));
  Py_INCREF(on_fault);
  Py_XSETREF(self->on_fault, on_fault);
  Py_INCREF(name);
  Py_XSETREF(self->name, name);
  return 0;
}

void Kernel_dealloc(Kernel* self) {
  Py_XDECREF(self->on_fault);
  Py_XDECREF(self->name);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(reinterpret_cast<PyObject*>(self));
  Py_DECREF(type);  // instances of heap types hold their type
}

// kernel.launch(args: bytes, grid: (x, y, z), stream: int): the general path's launch of a packed struct.
PyObject* Kernel_launch(Kernel* self, PyObject* const* args, Py_ssize_t count) {
  if (count != 3 || !PyBytes_Check(args[0]) || !PyTuple_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "launch(args: bytes, grid: tuple, stream: int)");
    return nullptr;
  }
  if (self->function == nullptr) {
    PyErr_SetString(PyExc_TypeError, "this Kernel was never initialized");
    return nullptr;
  }
  unsigned grid[3];
  if (read_grid(args[1], grid) < 0) return nullptr;
  void* stream = PyLong_AsVoidPtr(args[2]);
  if (stream == nullptr && PyErr_Occurred()) return nullptr;
  Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
  alignas(16) char stack[STACK_ARGS];
  char* buffer = args_buffer(size, stack);  // a private, aligned copy: the host kernel runs without the GIL
  if (buffer == nullptr) return nullptr;
  memcpy(buffer, PyBytes_AS_STRING(args[0]), static_cast<size_t>(size));
  int failed = run_kernel(self, grid, stream, buffer);
  if (buffer != stack) PyMem_Free(buffer);
  if (failed) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef Kernel_methods[] = {
    {"launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(Kernel_launch)), METH_FASTCALL,
     "Launch with a packed Args struct on a grid and stream."},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject* KernelType = nullptr;  // made from KernelSpec at import

struct HotPlan {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  Kernel* kernel;
  PyObject* owner;  // the Python launcher: keeps the loaded module or library alive
  char* args;  // the packed Args struct, pointer slots zero
  Py_ssize_t size;
  unsigned grid[3];
  Py_ssize_t outputs, inputs;
  PyObject* allocators;  // a tuple: one callable an output
  PyObject* pointer;  // array -> its data pointer
  PyObject* stream;  // device -> the library's current raw stream; None for the host
  PyObject* device;
  int returns_one;
};

int write_pointer(char* buffer, Py_ssize_t slot, PyObject* value) {
  unsigned long long pointer = PyLong_AsUnsignedLongLong(value);
  if (pointer == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return -1;
  memcpy(buffer + 8 * slot, &pointer, 8);
  return 0;
}

// plan(input_pointers: list[int]) -> the output, or a tuple of them.
PyObject* HotPlan_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  HotPlan* self = reinterpret_cast<HotPlan*>(callable);
  if (self->kernel == nullptr) {
    PyErr_SetString(PyExc_TypeError, "this HotPlan was never initialized");
    return nullptr;
  }
  Py_ssize_t count = PyVectorcall_NARGS(nargsf);
  if (count != 1 || kwnames != nullptr || !PyList_Check(args[0]) || PyList_GET_SIZE(args[0]) != self->inputs) {
    PyErr_Format(PyExc_TypeError, "a hot plan takes one list of %zd input pointers", self->inputs);
    return nullptr;
  }
  PyObject* pointers = args[0];
  alignas(16) char stack[STACK_ARGS];
  char* buffer = args_buffer(self->size, stack);
  if (buffer == nullptr) return nullptr;
  memcpy(buffer, self->args, static_cast<size_t>(self->size));
  PyObject* results[MAX_OUTPUTS];
  Py_ssize_t made = 0;
  PyObject* returned = nullptr;
  for (; made < self->outputs; ++made) {
    PyObject* result = PyObject_CallNoArgs(PyTuple_GET_ITEM(self->allocators, made));
    if (result == nullptr) goto done;
    results[made] = result;
    PyObject* pointer = PyObject_CallOneArg(self->pointer, result);
    if (pointer == nullptr) { ++made; goto done; }
    int bad = write_pointer(buffer, made, pointer);
    Py_DECREF(pointer);
    if (bad) { ++made; goto done; }
  }
  for (Py_ssize_t i = 0; i < self->inputs; ++i)
    if (write_pointer(buffer, self->outputs + i, PyList_GET_ITEM(pointers, i))) goto done;
  {
    void* stream = nullptr;
    if (self->stream != Py_None) {
      PyObject* raw = PyObject_CallOneArg(self->stream, self->device);
      if (raw == nullptr) goto done;
      stream = PyLong_AsVoidPtr(raw);
      Py_DECREF(raw);
      if (stream == nullptr && PyErr_Occurred()) goto done;
    }
    if (run_kernel(self->kernel, self->grid, stream, buffer)) goto done;
  }
  if (self->returns_one) {
    returned = results[0];
    Py_INCREF(returned);
  } else {
    returned = PyTuple_New(self->outputs);
    if (returned != nullptr)
      for (Py_ssize_t j = 0; j < self->outputs; ++j) {
        Py_INCREF(results[j]);
        PyTuple_SET_ITEM(returned, j, results[j]);
      }
  }
done:
  for (Py_ssize_t j = 0; j < made; ++j) Py_DECREF(results[j]);
  if (buffer != stack) PyMem_Free(buffer);
  return returned;
}

// HotPlan(kernel, owner, args, grid, outputs, inputs, allocators, pointer, stream, device, returns_one)
int HotPlan_init(HotPlan* self, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"kernel", "owner", "args", "grid", "inputs", "allocators", "pointer", "stream",
                                "device", "returns_one", nullptr};
  PyObject *kernel, *owner, *packed, *grid, *allocators, *pointer, *stream, *device;
  Py_ssize_t inputs;
  int returns_one;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OSOnO!OOOp", const_cast<char**>(names), KernelType, &kernel,
                                   &owner, &packed, &grid, &inputs, &PyTuple_Type, &allocators, &pointer, &stream,
                                   &device, &returns_one))
    return -1;
  Py_ssize_t outputs = PyTuple_GET_SIZE(allocators);
  Py_ssize_t size = PyBytes_GET_SIZE(packed);
  if (outputs < 1 || outputs > MAX_OUTPUTS || inputs < 0 || 8 * (outputs + inputs) > size) {
    PyErr_Format(PyExc_ValueError, "a hot plan needs 1 to %zd outputs and room for %zd pointers in %zd bytes",
                 MAX_OUTPUTS, outputs + inputs, size);
    return -1;
  }
  if (!PyTuple_Check(grid) || read_grid(grid, self->grid) < 0) return -1;
  char* copy = static_cast<char*>(PyMem_Malloc(size > 0 ? size : 1));
  if (copy == nullptr) {
    PyErr_NoMemory();
    return -1;
  }
  memcpy(copy, PyBytes_AS_STRING(packed), static_cast<size_t>(size));
  PyMem_Free(self->args);
  self->args = copy;
  self->size = size;
  self->outputs = outputs;
  self->inputs = inputs;
  self->returns_one = returns_one;
  PyObject* held[] = {kernel, owner, allocators, pointer, stream, device};
  for (PyObject* object : held) Py_INCREF(object);
  Py_XSETREF(self->kernel, reinterpret_cast<Kernel*>(kernel));
  Py_XSETREF(self->owner, owner);
  Py_XSETREF(self->allocators, allocators);
  Py_XSETREF(self->pointer, pointer);
  Py_XSETREF(self->stream, stream);
  Py_XSETREF(self->device, device);
  self->vectorcall = HotPlan_call;
  return 0;
}

void HotPlan_dealloc(HotPlan* self) {
  Py_XDECREF(self->kernel);
  Py_XDECREF(self->owner);
  Py_XDECREF(self->allocators);
  Py_XDECREF(self->pointer);
  Py_XDECREF(self->stream);
  Py_XDECREF(self->device);
  PyMem_Free(self->args);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(reinterpret_cast<PyObject*>(self));
  Py_DECREF(type);
}

PyTypeObject* HotPlanType = nullptr;

// configure(launch_error, launch_kernel, ctx_get_current, ctx_set_current, get_error_name): the
// error type to raise and the CUDA driver's entry points (addresses; 0 where there is no driver).
PyObject* configure(PyObject*, PyObject* args) {
  PyObject* error;
  unsigned long long launch, get_current, set_current, error_name;
  if (!PyArg_ParseTuple(args, "OKKKK", &error, &launch, &get_current, &set_current, &error_name)) return nullptr;
  Py_INCREF(error);
  Py_XSETREF(launch_error, error);
  if (launch && get_current && set_current && error_name) {
    driver.launch = reinterpret_cast<LaunchKernelFn>(static_cast<uintptr_t>(launch));
    driver.get_current = reinterpret_cast<CtxGetCurrentFn>(static_cast<uintptr_t>(get_current));
    driver.set_current = reinterpret_cast<CtxSetCurrentFn>(static_cast<uintptr_t>(set_current));
    driver.error_name = reinterpret_cast<GetErrorNameFn>(static_cast<uintptr_t>(error_name));
  }
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS, "Set the error type and the CUDA driver's entry points."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyMODINIT_FUNC PyInit__fast_call(void) {
  static PyType_Slot kernel_slots[] = {
      {Py_tp_doc, const_cast<char*>("One loaded kernel, launched from C.")},
      {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
      {Py_tp_init, reinterpret_cast<void*>(Kernel_init)},
      {Py_tp_dealloc, reinterpret_cast<void*>(Kernel_dealloc)},
      {Py_tp_methods, Kernel_methods},
      {0, nullptr},
  };
  static PyType_Spec kernel_spec = {"jiter_magic.native._fast_call.Kernel", sizeof(Kernel), 0, Py_TPFLAGS_DEFAULT, kernel_slots};
  KernelType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kernel_spec));
  HotPlanType = vectorcall_type("jiter_magic.native._fast_call.HotPlan", "A planned call of the hot path, run from C.",
                                sizeof(HotPlan), offsetof(HotPlan, vectorcall), reinterpret_cast<void*>(HotPlan_init),
                                reinterpret_cast<void*>(HotPlan_dealloc));
  static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "jiter_magic.native._fast_call", "jiter_magic's C-level call path.", -1,
                                    module_methods, nullptr, nullptr, nullptr, nullptr};
  return module_with_types(&module_def, {{"Kernel", KernelType}, {"HotPlan", HotPlanType}});  // both types kept here
}
