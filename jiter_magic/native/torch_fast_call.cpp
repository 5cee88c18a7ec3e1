// jiter_magic's hot path for torch tensors, read through ATen: the extension module
// jiter_magic.native._torch_call, which setup.py builds at install against the installed torch's
// headers (ATen's C++ ABI binds it to that torch; native/loader.py checks the version it was built
// for). Optional: without it the Python key and torch's Python allocator run.
//
// A torch getter called from Python or C costs 0.1-0.3 us (argument parsing, __torch_function__
// checks); the key of a call reads 7 of them a tensor and the output's allocation parses its
// arguments again. Here the same facts come from the tensor's C++ object directly: `torch_key`
// keys a call of plain dense CPU/CUDA tensors (and refuses, like the general path, any view that
// reaches past its storage: a storage shrunk in place under a planned view is caught on every call),
// `Allocator` makes an output with at::empty_strided, and `data_ptr` reads a tensor's pointer.
#include <Python.h>

#include <ATen/ops/empty_strided.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vectorcall_type.h"

namespace {

PyObject* plain_types[2] = {nullptr, nullptr};  // torch.Tensor, torch.nn.Parameter
const size_t KEY_WORDS = 512;

// 1 when the tensor keys (its words appended), 0 when the general path must take it.
int key_tensor(PyObject* object, int64_t* words, size_t* used, std::vector<uintptr_t>& pointers) {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(object));
  if (type != plain_types[0] && type != plain_types[1]) return 0;
  try {
    const at::Tensor& x = THPVariable_Unpack(object);
    if (!x.defined() || x.layout() != at::kStrided || x.is_nested() || x.is_quantized() || !x.has_storage()) return 0;
    if (x.requires_grad() || x.is_neg() || x.is_conj()) return 0;
    at::Device device = x.device();
    if (device.type() != at::kCPU && device.type() != at::kCUDA) return 0;
    uintptr_t address = reinterpret_cast<uintptr_t>(x.const_data_ptr());
    if (address <= 4095) return 0;  // a storage freed under the view: the general path refuses it
    int64_t dims = x.dim();
    if (*used + 5 + 2 * static_cast<size_t>(dims) > KEY_WORDS) return 0;
    at::IntArrayRef sizes = x.sizes(), strides = x.strides();
    if (x.numel() > 0) {  // the view must end inside its storage (one resized smaller under it does not)
      int64_t last = x.storage_offset();
      for (int64_t d = 0; d < dims; ++d) {
        if (strides[d] < 0) return 0;
        last += (sizes[d] - 1) * strides[d];
      }
      if (static_cast<uint64_t>(last + 1) * x.element_size() > x.storage().nbytes()) return 0;
    }
    words[(*used)++] = reinterpret_cast<intptr_t>(type);
    words[(*used)++] = static_cast<int64_t>(x.scalar_type());
    words[(*used)++] = (static_cast<int64_t>(device.type()) << 16) | (static_cast<int64_t>(device.index()) + 1);
    words[(*used)++] = static_cast<int64_t>(address & 15);
    words[(*used)++] = dims;
    for (int64_t d = 0; d < dims; ++d) words[(*used)++] = sizes[d];
    for (int64_t d = 0; d < dims; ++d) words[(*used)++] = strides[d];
    pointers.push_back(address);
    return 1;
  } catch (...) {  // a tensor that cannot say (no storage, say): the general path explains
    return 0;
  }
}

// torch_key(args: tuple) -> (key: bytes, pointers: list[int]) | None
PyObject* torch_key(PyObject*, PyObject* args) {
  if (!PyTuple_Check(args) || plain_types[0] == nullptr) Py_RETURN_NONE;
  int64_t words[KEY_WORDS];
  size_t used = 0;
  std::vector<uintptr_t> pointers;
  Py_ssize_t count = PyTuple_GET_SIZE(args);
  pointers.reserve(static_cast<size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i)
    if (!key_tensor(PyTuple_GET_ITEM(args, i), words, &used, pointers)) Py_RETURN_NONE;
  PyObject* list = PyList_New(count);
  if (list == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* pointer = PyLong_FromVoidPtr(reinterpret_cast<void*>(pointers[static_cast<size_t>(i)]));
    if (pointer == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, i, pointer);
  }
  PyObject* key = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(words), static_cast<Py_ssize_t>(used * 8));
  if (key == nullptr) {
    Py_DECREF(list);
    return nullptr;
  }
  PyObject* found = PyTuple_Pack(2, key, list);
  Py_DECREF(key);
  Py_DECREF(list);
  return found;
}

// data_ptr(tensor) -> int, without torch's argument parsing.
PyObject* data_ptr(PyObject*, PyObject* object) {
  HANDLE_TH_ERRORS
  if (!THPVariable_Check(object)) {
    PyErr_SetString(PyExc_TypeError, "data_ptr() takes a tensor");
    return nullptr;
  }
  return PyLong_FromVoidPtr(const_cast<void*>(THPVariable_Unpack(object).const_data_ptr()));
  END_HANDLE_TH_ERRORS
}

struct Allocator {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  std::vector<int64_t>* sizes;
  std::vector<int64_t>* strides;
  at::ScalarType dtype;
  at::Device* device;
};

// allocator() -> a new tensor (at::empty_strided); torch's own errors (out of memory) as torch raises them.
PyObject* Allocator_call(PyObject* callable, PyObject* const*, size_t nargsf, PyObject* kwnames) {
  Allocator* self = reinterpret_cast<Allocator*>(callable);
  if (self->sizes == nullptr) {
    PyErr_SetString(PyExc_TypeError, "this Allocator was never initialized");
    return nullptr;
  }
  if (PyVectorcall_NARGS(nargsf) != 0 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "an allocator takes no arguments");
    return nullptr;
  }
  HANDLE_TH_ERRORS
  at::Tensor made = at::empty_strided(*self->sizes, *self->strides, at::TensorOptions().dtype(self->dtype).device(*self->device));
  return THPVariable_Wrap(std::move(made));
  END_HANDLE_TH_ERRORS
}

int read_ints(PyObject* tuple, std::vector<int64_t>& into) {
  if (!PyTuple_Check(tuple)) {
    PyErr_SetString(PyExc_TypeError, "sizes and strides must be tuples of ints");
    return -1;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
    long long value = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (value == -1 && PyErr_Occurred()) return -1;
    into.push_back(value);
  }
  return 0;
}

// Allocator(sizes: tuple, strides: tuple, dtype: torch.dtype, device: torch.device)
int Allocator_init(PyObject* object, PyObject* args, PyObject* kwargs) {
  Allocator* self = reinterpret_cast<Allocator*>(object);
  PyObject *sizes, *strides, *dtype, *device;
  if (kwargs != nullptr || !PyArg_ParseTuple(args, "OOOO", &sizes, &strides, &dtype, &device)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Allocator(sizes, strides, dtype, device)");
    return -1;
  }
  if (!THPDtype_Check(dtype) || !THPDevice_Check(device)) {
    PyErr_SetString(PyExc_TypeError, "Allocator needs a torch.dtype and a torch.device");
    return -1;
  }
  std::vector<int64_t> read_sizes, read_strides;
  if (read_ints(sizes, read_sizes) < 0 || read_ints(strides, read_strides) < 0) return -1;
  if (read_sizes.size() != read_strides.size()) {
    PyErr_SetString(PyExc_ValueError, "sizes and strides differ in length");
    return -1;
  }
  delete self->sizes;
  delete self->strides;
  delete self->device;
  self->sizes = new std::vector<int64_t>(std::move(read_sizes));
  self->strides = new std::vector<int64_t>(std::move(read_strides));
  self->dtype = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
  self->device = new at::Device(reinterpret_cast<THPDevice*>(device)->device);
  self->vectorcall = Allocator_call;
  return 0;
}

void Allocator_dealloc(PyObject* object) {
  Allocator* self = reinterpret_cast<Allocator*>(object);
  delete self->sizes;
  delete self->strides;
  delete self->device;
  PyTypeObject* type = Py_TYPE(object);
  type->tp_free(object);
  Py_DECREF(type);
}

// configure(tensor_type, parameter_type): the plain tensor types torch_key accepts.
PyObject* configure(PyObject*, PyObject* args) {
  PyObject *tensor, *parameter;
  if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &tensor, &PyType_Type, &parameter)) return nullptr;
  Py_INCREF(tensor);
  Py_INCREF(parameter);
  Py_XSETREF(plain_types[0], tensor);
  Py_XSETREF(plain_types[1], parameter);
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS, "Set the plain tensor types torch_key accepts."},
    {"torch_key", torch_key, METH_O, "The hot path's key of a call of plain torch tensors, or None."},
    {"data_ptr", data_ptr, METH_O, "A tensor's data pointer."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyMODINIT_FUNC PyInit__torch_call(void) {
  PyTypeObject* type = vectorcall_type(
      "jiter_magic.native._torch_call.Allocator", "Allocates one output of a plan: at::empty_strided.",
      sizeof(Allocator), offsetof(Allocator, vectorcall), reinterpret_cast<void*>(Allocator_init),
      reinterpret_cast<void*>(Allocator_dealloc));
  static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "jiter_magic.native._torch_call", "jiter_magic's hot path for torch tensors.", -1,
                                    module_methods, nullptr, nullptr, nullptr, nullptr};
  PyObject* module = module_with_types(&module_def, {{"Allocator", type}});
  Py_XDECREF(type);  // the module holds it
  return module;
}
