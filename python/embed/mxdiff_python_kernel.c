/* libmxdiff_python_kernel.so: an external kernel (fuzz/modules/mxdiff_kernel_abi.h) that runs a
 * Python kernel by embedding CPython (python/README.md, "Under the fuzzer"). Each case's host
 * buffers become read-only NumPy views (no copies) handed to mxdiff.embed.run_case, which calls
 * MXDIFF_PYTHON=module:function and returns the fp16 bits or a failure (python/raised,
 * python/shape, python/timeout, python/bound, python/specials).
 *
 * MXDIFF_PYTHON_TIMEOUT=SECONDS (default 60): a watchdog thread makes a kernel still running past
 * it raise TimeoutError at its next Python instruction (a pending call); a kernel stuck in native
 * code is left to libFuzzer's own -timeout. MXDIFF_PYTHON_PATH: folders put first on sys.path
 * (the working folder is always there). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mxdiff_kernel_abi.h"

static PyObject* g_run_case;
static PyObject* g_frombuffer;
static int g_init_done;
static char g_init_error[400];
static PyThreadState* g_saved;

/* The watchdog: one call at a time (the ABI's callers run cases one after another). */
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static unsigned long g_call_id;
static int g_call_active;
static struct timespec g_deadline;
static double g_timeout_s = 60.0;
static unsigned long g_timed_out_call;

static int raise_timeout(void* arg) {
  unsigned long id = (unsigned long)(size_t)arg;
  pthread_mutex_lock(&g_mutex);
  const int still = g_call_active && g_call_id == id;
  pthread_mutex_unlock(&g_mutex);
  if (!still) return 0;
  char text[96];
  snprintf(text, sizeof text, "MXDIFF_PYTHON_TIMEOUT: the kernel ran past %g s", g_timeout_s);
  PyErr_SetString(PyExc_TimeoutError, text);
  return -1;
}

static void* watchdog(void* unused) {
  (void)unused;
  pthread_mutex_lock(&g_mutex);
  for (;;) {
    while (!g_call_active) pthread_cond_wait(&g_cond, &g_mutex);
    const unsigned long id = g_call_id;
    const int rc = pthread_cond_timedwait(&g_cond, &g_mutex, &g_deadline);
    if (rc != 0 && g_call_active && g_call_id == id && g_timed_out_call != id) {
      g_timed_out_call = id;
      Py_AddPendingCall(raise_timeout, (void*)(size_t)id);
    }
  }
  return NULL;
}

static void python_error_text(char* out, size_t size) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject* text = value ? PyObject_Str(value) : NULL;
  const char* utf8 = text ? PyUnicode_AsUTF8(text) : NULL;
  snprintf(out, size, "%s: %s", type ? ((PyTypeObject*)type)->tp_name : "error", utf8 ? utf8 : "?");
  Py_XDECREF(text);
  PyErr_Restore(type, value, tb);
  PyErr_Print(); /* the traceback, on stderr */
}

/* Called with the GIL held. */
static int initialize(void) {
  const char* timeout = getenv("MXDIFF_PYTHON_TIMEOUT");
  if (timeout && atof(timeout) > 0) g_timeout_s = atof(timeout);
  if (PyRun_SimpleString("import os, sys\n"
                         "sys.path[:0] = [os.getcwd()] + [p for p in os.environ.get('MXDIFF_PYTHON_PATH', '')"
                         ".split(os.pathsep) if p]\n") != 0) {
    snprintf(g_init_error, sizeof g_init_error, "python/init: cannot set sys.path");
    return -1;
  }
  PyObject* embed = PyImport_ImportModule("mxdiff.embed");
  PyObject* numpy = embed ? PyImport_ImportModule("numpy") : NULL;
  PyObject* load = embed ? PyObject_GetAttrString(embed, "_load") : NULL;
  PyObject* kernel = load ? PyObject_CallNoArgs(load) : NULL;
  if (!kernel) {
    char why[300];
    python_error_text(why, sizeof why);
    snprintf(g_init_error, sizeof g_init_error, "python/init: %s (MXDIFF_PYTHON=%s)", why,
             getenv("MXDIFF_PYTHON") ? getenv("MXDIFF_PYTHON") : "");
    Py_XDECREF(embed);
    Py_XDECREF(numpy);
    Py_XDECREF(load);
    return -1;
  }
  g_run_case = PyObject_GetAttrString(embed, "run_case");
  g_frombuffer = PyObject_GetAttrString(numpy, "frombuffer");
  Py_DECREF(kernel);
  Py_DECREF(load);
  Py_DECREF(numpy);
  Py_DECREF(embed);
  if (!g_run_case || !g_frombuffer) {
    python_error_text(g_init_error, sizeof g_init_error);
    return -1;
  }
  pthread_t thread;
  pthread_create(&thread, NULL, watchdog, NULL);
  pthread_detach(thread);
  return 0;
}

static PyObject* view(const void* data, size_t bytes, const char* dtype, PyObject* shape) {
  static char empty[1];
  PyObject* memory = PyMemoryView_FromMemory((char*)(data ? data : empty), (Py_ssize_t)bytes, PyBUF_READ);
  PyObject* flat = memory ? PyObject_CallFunction(g_frombuffer, "Os", memory, dtype) : NULL;
  PyObject* shaped = flat ? PyObject_CallMethod(flat, "reshape", "O", shape) : NULL;
  Py_XDECREF(memory);
  Py_XDECREF(flat);
  Py_DECREF(shape);
  return shaped;
}

__attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void);

/* Starts the embedded Python once, as if MXDIFF_PYTHON_EXECUTABLE (default: the python this
 * library was built for) ran: its standard library, its site-packages, its virtual environment
 * (pyvenv.cfg). 0, or -1 with the reason in message. */
static int start_python(char* message, size_t message_size) {
  if (Py_IsInitialized()) return 0;
  /* The loader opened this library (and libpython with it) RTLD_LOCAL: extension modules,
   * which expect libpython's symbols to be global, would not load. Promote it. */
  Dl_info info;
  if (dladdr((void*)&Py_InitializeFromConfig, &info) != 0 && info.dli_fname != NULL) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD | RTLD_NODELETE);
  }
  /* Python and the watchdog thread outlive the loader's dlclose: keep this library mapped. */
  if (dladdr((void*)&mxdiff_kernel_entry, &info) != 0 && info.dli_fname != NULL) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0; /* the signals are libFuzzer's */
  const char* executable = getenv("MXDIFF_PYTHON_EXECUTABLE");
  PyConfig_SetBytesString(&config, &config.program_name, executable ? executable : MXDIFF_PYTHON_BUILD_EXECUTABLE);
  const PyStatus status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    snprintf(message, message_size, "python/init: %s", status.err_msg ? status.err_msg : "cannot start Python");
    return -1;
  }
  g_saved = PyEval_SaveThread();
  return 0;
}

/* Calls mxdiff.embed.run_case under the watchdog's deadline. With the GIL held. */
static PyObject* call_with_deadline(const mxdiff_problem* p, PyObject* a, PyObject* codes, PyObject* scales,
                                    PyObject* offsets) {
  pthread_mutex_lock(&g_mutex);
  ++g_call_id;
  g_call_active = 1;
  clock_gettime(CLOCK_REALTIME, &g_deadline);
  g_deadline.tv_sec += (time_t)g_timeout_s;
  g_deadline.tv_nsec += (long)((g_timeout_s - (double)(time_t)g_timeout_s) * 1e9);
  if (g_deadline.tv_nsec >= 1000000000L) {
    g_deadline.tv_sec += 1;
    g_deadline.tv_nsec -= 1000000000L;
  }
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_mutex);
  PyObject* result = PyObject_CallFunction(g_run_case, "OOOOiiii", a, codes, scales, offsets, p->transform,
                                           p->step_model, p->cta_k, p->splits);
  pthread_mutex_lock(&g_mutex);
  g_call_active = 0;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_mutex);
  return result;
}

/* run_case's (status, payload) into the output (`bytes` of fp16 bits) or the failure message. */
static int take_result(PyObject* result, uint16_t* output, size_t bytes, char* message, size_t message_size) {
  long status = -1;
  PyObject* payload = NULL;
  if (result && PyTuple_Check(result) && PyTuple_Size(result) == 2) {
    status = PyLong_AsLong(PyTuple_GetItem(result, 0));
    payload = PyTuple_GetItem(result, 1);
  }
  if (status == 0) {
    int code = MXDIFF_KERNEL_FAILED;
    Py_buffer buffer;
    if (PyObject_GetBuffer(payload, &buffer, PyBUF_C_CONTIGUOUS) == 0) {
      if ((size_t)buffer.len == bytes) {
        memcpy(output, buffer.buf, bytes);
        code = MXDIFF_KERNEL_OK;
      } else {
        snprintf(message, message_size, "python/shape: %zd bytes for %zu outputs", buffer.len, bytes / 2);
      }
      PyBuffer_Release(&buffer);
    } else {
      python_error_text(message, message_size);
    }
    return code;
  }
  if (status > 0 && payload && PyUnicode_Check(payload)) {
    snprintf(message, message_size, "%s", PyUnicode_AsUTF8(payload));
  } else {
    char why[300];
    if (PyErr_Occurred()) {
      python_error_text(why, sizeof why);
    } else {
      snprintf(why, sizeof why, "mxdiff.embed.run_case returned no (status, payload)");
    }
    snprintf(message, message_size, "python/harness: %s", why);
  }
  return MXDIFF_KERNEL_FAILED;
}

static int run(const mxdiff_problem* p, uint16_t* output, char* message, size_t message_size) {
  if (start_python(message, message_size) != 0) return MXDIFF_KERNEL_FAILED;
  PyGILState_STATE gil = PyGILState_Ensure();
  if (!g_init_done) {
    g_init_done = 1;
    if (initialize() != 0 && !g_init_error[0]) snprintf(g_init_error, sizeof g_init_error, "python/init failed");
  }
  if (g_init_error[0]) {
    snprintf(message, message_size, "%s", g_init_error);
    PyGILState_Release(gil);
    return MXDIFF_KERNEL_FAILED;
  }
  const size_t rows = (size_t)p->row_offsets[p->groups], n = (size_t)p->n, k = (size_t)p->k;
  const size_t g = (size_t)p->groups;
  PyObject* a = view(p->activations, rows * k * 2, "float16", Py_BuildValue("(nn)", (Py_ssize_t)rows, (Py_ssize_t)k));
  PyObject* codes = view(p->packed_codes, g * n * k / 2, "uint8",
                         Py_BuildValue("(nnn)", (Py_ssize_t)g, (Py_ssize_t)n, (Py_ssize_t)(k / 2)));
  PyObject* scales = view(p->scale_bytes, g * n * k / 32, "uint8",
                          Py_BuildValue("(nnn)", (Py_ssize_t)g, (Py_ssize_t)n, (Py_ssize_t)(k / 32)));
  PyObject* offsets = view(p->row_offsets, (g + 1) * 4, "int32", Py_BuildValue("(n)", (Py_ssize_t)(g + 1)));
  PyObject* result = a && codes && scales && offsets ? call_with_deadline(p, a, codes, scales, offsets) : NULL;
  const int code = take_result(result, output, rows * n * 2, message, message_size);
  PyErr_Clear();
  Py_XDECREF(result);
  Py_XDECREF(a);
  Py_XDECREF(codes);
  Py_XDECREF(scales);
  Py_XDECREF(offsets);
  PyGILState_Release(gil);
  return code;
}

static const mxdiff_kernel kKernel = {MXDIFF_KERNEL_ABI_VERSION, "python", run};

__attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) { return &kKernel; }
