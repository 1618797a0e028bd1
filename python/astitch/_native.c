/*
 * _native.c: the CPython binding of astitch's public C API, as much of it as the Python
 * package calls (docs/pytorch.md, *Binding*).
 *
 *   compile(json, target="auto", *, fusion=None, variant_search=True, caller_workspace=False,
 *           view_outputs=False, source="<graph>")
 *       -> Executable: reads graph.json text, plans and compiles it
 *   Executable.run_host(inputs, outputs)          host buffers (addresses as ints)
 *   Executable.run_device(inputs, outputs, stream, workspace=0)
 *       device pointers on a CUstream (an int, 0 for the default stream); returns once the
 *       launches are queued; workspace: the run's memory from the caller (an address of
 *       .workspace_bytes bytes; required under caller_workspace)
 *   Executable.output_view(i) -> None, or (input, offset, strides) for an output left as a
 *       view of an input (view_outputs: runs do not write it; its pointer may be 0)
 *   Executable.plan_text(), .variant(), .target, .num_kernels, .num_inputs, .num_outputs,
 *       .compute_ops (dot and custom nodes of the graph), .workspace_bytes (cuda)
 *   Error(RuntimeError): .status holds astitch's status name; the message is the context's
 *
 * Each Executable owns its context, graph and executable, so that its errors and its runs are
 * its own: one thread at a time may run it (the C API's rule); the GIL is released during
 * compiles, host runs and a device run that may time variants (a settled device run only
 * queues launches, and keeps it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "astitch/astitch.h"
#include "astitch/runtime.h"

/* Pointer arrays of up to this many tensors live on the stack during a run. */
#define STACK_TENSORS 32

static PyObject *native_error;

typedef struct {
    PyObject_HEAD
    astitch_context *ctx;
    astitch_graph *graph;
    astitch_executable *exe;
} Executable;

/* Raises Error("what: status: message") with .status the status name; returns NULL. */
static PyObject *raise_status(astitch_context *ctx, astitch_status s, const char *what)
{
    const char *msg = ctx ? astitch_last_error(ctx) : "";
    PyObject *err = PyObject_CallFunction(native_error, "N",
                                          PyUnicode_FromFormat("%s: %s%s%s", what,
                                                               astitch_status_name(s),
                                                               *msg ? ": " : "", msg));
    if (!err)
        return NULL;
    PyObject *name = PyUnicode_FromString(astitch_status_name(s));
    if (name && PyObject_SetAttrString(err, "status", name) == 0)
        PyErr_SetObject(native_error, err);
    Py_XDECREF(name);
    Py_DECREF(err);
    return NULL;
}

static void executable_dealloc(Executable *self)
{
    astitch_executable_destroy(self->exe);
    astitch_graph_destroy(self->graph);
    astitch_context_destroy(self->ctx);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Fills ptrs[0..n) from a sequence of ints; n must be the sequence's length. Returns false
 * with a Python error set otherwise. */
static bool read_pointers(PyObject *seq, const char *what, Py_ssize_t want, uint64_t *ptrs)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast)
        return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n != want) {
        PyErr_Format(PyExc_ValueError, "%s: %zd addresses given, the graph has %zd", what, n,
                     want);
        Py_DECREF(fast);
        return false;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        ptrs[i] = (uint64_t)PyLong_AsUnsignedLongLong(items[i]);
        if (PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "%s[%zd]: an address (a non-negative int) expected",
                         what, i);
            Py_DECREF(fast);
            return false;
        }
    }
    Py_DECREF(fast);
    return true;
}

/* run(inputs, outputs, stream or None for the host, workspace address or 0): the common body
 * of both run methods. */
static PyObject *run(Executable *self, PyObject *inputs, PyObject *outputs, PyObject *stream,
                     unsigned long long workspace)
{
    Py_ssize_t nin = astitch_graph_num_parameters(self->graph);
    Py_ssize_t nout = astitch_graph_num_outputs(self->graph);
    uint64_t stack[2 * STACK_TENSORS];
    uint64_t *in = stack, *out = stack + STACK_TENSORS;
    uint64_t *heap = NULL;
    if (nin > STACK_TENSORS || nout > STACK_TENSORS) {
        heap = malloc((size_t)(nin + nout + 1) * sizeof *heap);
        if (!heap)
            return PyErr_NoMemory();
        in = heap;
        out = heap + nin;
    }
    PyObject *result = NULL;
    uint64_t st = 0;
    if (stream) {
        st = (uint64_t)PyLong_AsUnsignedLongLong(stream);
        if (PyErr_Occurred())
            goto done;
    }
    if (!read_pointers(inputs, "inputs", nin, in) || !read_pointers(outputs, "outputs", nout, out))
        goto done;
    size_t ws_bytes = 0;
    if (workspace && astitch_executable_workspace_bytes(self->exe, &ws_bytes) != ASTITCH_OK) {
        raise_status(self->ctx, ASTITCH_ERR_UNSUPPORTED, "astitch_executable_workspace_bytes");
        goto done;
    }
    /* A device run whose variant search has settled only queues work (a few us): it keeps the
     * GIL, whose release and retaking cost more inside a model's step than they free (measured
     * in bench/RESULTS.md). Host runs, and a first device run that may time its variants (a
     * stream synchronization), let other threads run meanwhile. */
    astitch_variant_info variant;
    bool release = !stream || astitch_executable_variant(self->exe, &variant) != ASTITCH_OK ||
                   variant.state == ASTITCH_VARIANT_PENDING;
    PyThreadState *saved = release ? PyEval_SaveThread() : NULL;
    astitch_status s;
    if (stream && workspace)
        s = astitch_execute_device_workspace(self->exe, in, out, (void *)(uintptr_t)st,
                                             (uint64_t)workspace, ws_bytes);
    else if (stream)
        s = astitch_execute_device(self->exe, in, out, (void *)(uintptr_t)st);
    else
        s = astitch_execute(self->exe, (const void *const *)(void *)in, (void *const *)(void *)out);
    if (saved)
        PyEval_RestoreThread(saved);
    if (s != ASTITCH_OK) {
        raise_status(self->ctx, s, !stream ? "astitch_execute" : workspace
                                   ? "astitch_execute_device_workspace" : "astitch_execute_device");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    free(heap);
    return result;
}

static PyObject *executable_run_host(Executable *self, PyObject *args)
{
    PyObject *inputs, *outputs;
    if (!PyArg_ParseTuple(args, "OO:run_host", &inputs, &outputs))
        return NULL;
    if (sizeof(void *) != sizeof(uint64_t)) {
        PyErr_SetString(PyExc_NotImplementedError, "run_host needs 64-bit addresses");
        return NULL;
    }
    return run(self, inputs, outputs, NULL, 0);
}

static PyObject *executable_run_device(Executable *self, PyObject *args)
{
    PyObject *inputs, *outputs, *stream;
    unsigned long long workspace = 0;
    if (!PyArg_ParseTuple(args, "OOO!|K:run_device", &inputs, &outputs, &PyLong_Type, &stream,
                          &workspace))
        return NULL;
    return run(self, inputs, outputs, stream, workspace);
}

static PyObject *executable_plan_text(Executable *self, PyObject *unused)
{
    const astitch_plan *p = astitch_executable_plan(self->exe);
    if (!p)
        return PyUnicode_FromString("");
    char *text = NULL;
    astitch_status s = astitch_plan_text(p, &text);
    if (s != ASTITCH_OK)
        return raise_status(self->ctx, s, "astitch_plan_text");
    PyObject *r = PyUnicode_FromString(text);
    astitch_free(text);
    return r;
}

static const char *variant_state_name(astitch_variant_state v)
{
    switch (v) {
    case ASTITCH_VARIANT_NONE: return "none";
    case ASTITCH_VARIANT_PENDING: return "pending";
    case ASTITCH_VARIANT_TIMED: return "timed";
    case ASTITCH_VARIANT_CACHED: return "cached";
    case ASTITCH_VARIANT_CAPTURED: return "captured";
    }
    return "?";
}

/* output_view(i) -> None, or (input, offset, strides) in elements */
static PyObject *executable_output_view(Executable *self, PyObject *args)
{
    int i;
    if (!PyArg_ParseTuple(args, "i:output_view", &i))
        return NULL;
    bool is_view;
    astitch_output_view v;
    astitch_status s = astitch_executable_output_view(self->exe, i, &is_view, &v);
    if (s != ASTITCH_OK)
        return raise_status(self->ctx, s, "astitch_executable_output_view");
    if (!is_view)
        return Py_NewRef(Py_None);
    PyObject *strides = PyTuple_New(v.rank);
    for (int d = 0; strides && d < v.rank; d++)
        PyTuple_SET_ITEM(strides, d, PyLong_FromLongLong(v.strides[d]));
    return strides ? Py_BuildValue("(iLN)", v.input, (long long)v.offset, strides) : NULL;
}

/* variant() -> (state, form, {form: us} of the forms timed) */
static PyObject *executable_variant(Executable *self, PyObject *unused)
{
    astitch_variant_info v;
    astitch_status s = astitch_executable_variant(self->exe, &v);
    if (s != ASTITCH_OK)
        return raise_status(self->ctx, s, "astitch_executable_variant");
    PyObject *us = PyDict_New();
    for (int i = 0; us && i < ASTITCH_VARIANT_FORMS; i++) {
        PyObject *t = v.us[i] > 0 ? PyFloat_FromDouble(v.us[i]) : NULL;
        if (t && PyDict_SetItemString(us, astitch_variant_form_name(i), t) < 0)
            Py_CLEAR(us);
        Py_XDECREF(t);
    }
    return us ? Py_BuildValue("(ssN)", variant_state_name(v.state),
                              astitch_variant_form_name(v.form), us)
              : NULL;
}

static PyObject *executable_get_target(Executable *self, void *unused)
{
    return PyUnicode_FromString(astitch_target_name(astitch_executable_target(self->exe)));
}

static PyObject *executable_get_num_kernels(Executable *self, void *unused)
{
    const astitch_plan *p = astitch_executable_plan(self->exe);
    return PyLong_FromLong(p ? astitch_plan_num_kernels(p) : 0);
}

static PyObject *executable_get_num_inputs(Executable *self, void *unused)
{
    return PyLong_FromLong(astitch_graph_num_parameters(self->graph));
}

static PyObject *executable_get_num_outputs(Executable *self, void *unused)
{
    return PyLong_FromLong(astitch_graph_num_outputs(self->graph));
}

static PyObject *executable_get_workspace_bytes(Executable *self, void *unused)
{
    size_t bytes = 0;
    if (astitch_executable_target(self->exe) == ASTITCH_TARGET_CUDA &&
        astitch_executable_workspace_bytes(self->exe, &bytes) != ASTITCH_OK)
        return raise_status(self->ctx, ASTITCH_ERR_UNSUPPORTED,
                            "astitch_executable_workspace_bytes");
    return PyLong_FromSize_t(bytes);
}

static PyObject *executable_get_compute_ops(Executable *self, void *unused)
{
    long n = 0;
    for (int i = 0; i < astitch_graph_num_nodes(self->graph); i++) {
        astitch_op op = astitch_node_op(self->graph, i);
        n += op == ASTITCH_OP_DOT || op == ASTITCH_OP_CUSTOM;
    }
    return PyLong_FromLong(n);
}

static PyMethodDef executable_methods[] = {
    {"run_host", (PyCFunction)executable_run_host, METH_VARARGS,
     "run_host(inputs, outputs): runs on host buffers given by address; returns when done"},
    {"run_device", (PyCFunction)executable_run_device, METH_VARARGS,
     "run_device(inputs, outputs, stream, workspace=0): queues the run on a CUstream (an int)"},
    {"plan_text", (PyCFunction)executable_plan_text, METH_NOARGS, "the plan as text"},
    {"output_view", (PyCFunction)executable_output_view, METH_VARARGS,
     "output_view(i): None, or (input, offset, strides) of an output left as a view"},
    {"variant", (PyCFunction)executable_variant, METH_NOARGS,
     "(state, form, {form: us} of the forms timed) of the variant search"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef executable_getset[] = {
    {"target", (getter)executable_get_target, NULL, "the target used", NULL},
    {"num_kernels", (getter)executable_get_num_kernels, NULL, "kernels of the plan", NULL},
    {"num_inputs", (getter)executable_get_num_inputs, NULL, "graph parameters", NULL},
    {"num_outputs", (getter)executable_get_num_outputs, NULL, "graph outputs", NULL},
    {"compute_ops", (getter)executable_get_compute_ops, NULL, "dot and custom nodes", NULL},
    {"workspace_bytes", (getter)executable_get_workspace_bytes, NULL,
     "device memory a run uses besides its tensors (cuda; 0 for other targets)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject executable_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "astitch._native.Executable",
    .tp_basicsize = sizeof(Executable),
    .tp_dealloc = (destructor)executable_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled astitch graph (made by astitch._native.compile)",
    .tp_methods = executable_methods,
    .tp_getset = executable_getset,
};

static PyObject *native_compile(PyObject *module, PyObject *args, PyObject *kw)
{
    static char *names[] = {"json", "target", "fusion", "variant_search", "caller_workspace",
                            "view_outputs", "source", NULL};
    const char *json, *target = "auto", *fusion = NULL, *source = "<graph>";
    Py_ssize_t len;
    int variant_search = 1, caller_workspace = 0, view_outputs = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|s$zppps:compile", names, &json, &len, &target,
                                     &fusion, &variant_search, &caller_workspace, &view_outputs,
                                     &source))
        return NULL;
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.variant_search = variant_search != 0;
    o.caller_workspace = caller_workspace != 0;
    o.view_outputs = view_outputs != 0;
    if (astitch_target_from_name(target, &o.target) != ASTITCH_OK) {
        PyErr_Format(PyExc_ValueError,
                     "target '%s': one of auto, reference, host, cuda expected", target);
        return NULL;
    }
    if (fusion && astitch_fusion_from_name(fusion, &o.plan.fusion) != ASTITCH_OK) {
        PyErr_Format(PyExc_ValueError, "fusion '%s': one of stitch, xla, none expected", fusion);
        return NULL;
    }
    Executable *self = PyObject_New(Executable, &executable_type);
    if (!self)
        return NULL;
    self->ctx = NULL;
    self->graph = NULL;
    self->exe = NULL;
    astitch_status s = astitch_context_create(&self->ctx);
    const char *step = "astitch_context_create";
    Py_BEGIN_ALLOW_THREADS
    if (s == ASTITCH_OK) {
        step = "astitch_graph_read_json";
        s = astitch_graph_read_json(self->ctx, json, (size_t)len, source, &self->graph);
    }
    if (s == ASTITCH_OK) {
        step = "astitch_graph_verify";
        s = astitch_graph_verify(self->graph);
    }
    if (s == ASTITCH_OK) {
        step = "astitch_compile";
        s = astitch_compile(self->graph, &o, &self->exe);
    }
    Py_END_ALLOW_THREADS
    if (s != ASTITCH_OK) {
        raise_status(self->ctx, s, step);
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyObject *native_version(PyObject *module, PyObject *unused)
{
    return PyUnicode_FromString(astitch_version());
}

static PyMethodDef native_methods[] = {
    {"compile", (PyCFunction)(void (*)(void))native_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(json, target='auto', *, fusion=None, variant_search=True, caller_workspace=False, "
     "view_outputs=False, source='<graph>')"},
    {"version", native_version, METH_NOARGS, "the version of the astitch library loaded"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, .m_name = "astitch._native",
    .m_doc = "The CPython binding of astitch's C API (docs/pytorch.md)", .m_size = -1,
    .m_methods = native_methods,
};

PyMODINIT_FUNC PyInit__native(void);

PyMODINIT_FUNC PyInit__native(void)
{
    if (PyType_Ready(&executable_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (!m)
        return NULL;
    native_error = PyErr_NewExceptionWithDoc(
        "astitch._native.Error",
        "An astitch call failed; .status is the status name, the message says where",
        PyExc_RuntimeError, NULL);
    if (!native_error || PyModule_AddObjectRef(m, "Error", native_error) < 0 ||
        PyModule_AddObjectRef(m, "Executable", (PyObject *)&executable_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
