// What both extension modules (fast_call.cpp, torch_fast_call.cpp) share: a type whose instances
// are called through vectorcall (`HotPlan`, `Allocator`), made from a spec as the limited API asks,
// and the module made with its types. A source includes <Python.h> first (fast_call.cpp defines
// PY_SSIZE_T_CLEAN before it).
#ifndef JITER_MAGIC_NATIVE_VECTORCALL_TYPE_H
#define JITER_MAGIC_NATIVE_VECTORCALL_TYPE_H

#include <Python.h>
#include <structmember.h>

#include <initializer_list>
#include <utility>

#ifndef Py_TPFLAGS_HAVE_VECTORCALL
#define Py_TPFLAGS_HAVE_VECTORCALL _Py_TPFLAGS_HAVE_VECTORCALL
#endif

// A new heap type `name` of `basicsize` bytes, made by `init` and freed by `dealloc`, whose calls go
// to the vectorcallfunc each instance keeps at `vectorcall_offset`. The slots, members and spec may
// be local: PyType_FromSpec copies the doc and members and keeps only the name, a literal.
inline PyTypeObject* vectorcall_type(const char* name, const char* doc, Py_ssize_t basicsize,
                                     Py_ssize_t vectorcall_offset, void* init, void* dealloc) {
  PyMemberDef members[] = {
      {const_cast<char*>("__vectorcalloffset__"), T_PYSSIZET, vectorcall_offset, READONLY, nullptr},
      {nullptr, 0, 0, 0, nullptr},
  };
  PyType_Slot slots[] = {
      {Py_tp_doc, const_cast<char*>(doc)},
      {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
      {Py_tp_init, init},
      {Py_tp_dealloc, dealloc},
      {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
      {Py_tp_members, members},
      {0, nullptr},
  };
  PyType_Spec spec = {name, static_cast<int>(basicsize), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, slots};
  return reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
}

// The module of `def` with each (name, type) added (a new reference: the caller keeps its own), or
// nullptr with the error set where a type could not be made or added.
inline PyObject* module_with_types(PyModuleDef* def,
                                   std::initializer_list<std::pair<const char*, PyTypeObject*>> types) {
  for (const auto& named : types) {
    if (named.second == nullptr) return nullptr;  // PyType_FromSpec set the error
  }
  PyObject* module = PyModule_Create(def);
  if (module == nullptr) return nullptr;
  for (const auto& named : types) {
    if (PyModule_AddObjectRef(module, named.first, reinterpret_cast<PyObject*>(named.second)) < 0) {
      Py_DECREF(module);
      return nullptr;
    }
  }
  return module;
}

#endif  // JITER_MAGIC_NATIVE_VECTORCALL_TYPE_H
