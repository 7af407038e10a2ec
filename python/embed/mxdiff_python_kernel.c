/* libmxdiff_python_kernel.so: an external kernel (fuzz/modules/mxdiff_kernel_abi.h) that runs a
 * Python kernel by embedding CPython (python/README.md, "Under the fuzzer"). Each case's host
 * buffers become read-only NumPy views (no copies) handed to mxdiff.embed.run_case, which calls
 * MXDIFF_PYTHON=module:function on copies of them and returns the fp16 bits or a failure
 * (python/raised, python/shape, python/inputs-modified, python/timeout, python/bound, python/specials).
 *
 * MXDIFF_PYTHON_TIMEOUT=SECONDS (default 60): a watchdog thread makes a kernel still running past
 * it raise mxdiff.embed.KernelTimeout (python/timeout) in its own thread, pure-Python loops
 * included; a kernel still not back kGraceSeconds later (stuck in native code) ends the process
 * as a python/timeout finding (exit). MXDIFF_PYTHON_PATH: folders put first on sys.path (the
 * working folder is always there). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <errno.h>
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
static PyObject* g_timeout_type; /* mxdiff.embed.KernelTimeout */
static char g_report_folder[1024]; /* mxdiff.embed._report_folder(), for a call that never returns */

/* The watchdog: one call at a time (the ABI's callers run cases one after another). */
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static unsigned long g_call_id;
static int g_call_active;
static struct timespec g_deadline;
static double g_timeout_s = 60.0;
static unsigned long g_timed_out_call;
static unsigned long g_kernel_thread; /* PyThread_get_thread_ident() of the thread in the call */
/* How long past the limit a kernel may take to come back to Python once interrupted. */
static const double kGraceSeconds = 5.0;

static void add_seconds(struct timespec* t, double seconds) {
  t->tv_sec += (time_t)seconds;
  t->tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
  if (t->tv_nsec >= 1000000000L) {
    t->tv_sec += 1;
    t->tv_nsec -= 1000000000L;
  }
}

/* Raises KernelTimeout in the kernel's thread. On a thread of its own: taking the GIL waits until
 * the kernel's thread lets it go, which a pure-Python loop does every switch interval (so this
 * works on every CPython, unlike Py_AddPendingCall, which a thread that is not the main one does
 * not make the main thread look at before 3.12), and native code holding it never does. Lock
 * order: the GIL, then g_mutex (the call's thread takes g_mutex with the GIL held, too). */
static void* interrupt_kernel(void* arg) {
  const unsigned long id = (unsigned long)(size_t)arg;
  PyGILState_STATE gil = PyGILState_Ensure();
  pthread_mutex_lock(&g_mutex);
  if (g_call_active && g_call_id == id) PyThreadState_SetAsyncExc(g_kernel_thread, g_timeout_type);
  pthread_mutex_unlock(&g_mutex);
  PyGILState_Release(gil);
  return NULL;
}

/* The kernel did not come back from native code: the case cannot end, so the process does, as a
 * python/timeout finding. exit(), not _exit(): the harness's output is flushed, and under libFuzzer
 * its exit handler keeps the input as a crash artifact. */
static void end_stuck_call(void) {
  char path[1200] = "";
  char text[300];
  snprintf(text, sizeof text,
           "python/timeout: the kernel ran past MXDIFF_PYTHON_TIMEOUT=%g s and did not return to Python %g s "
           "later (stuck in native code, which cannot be interrupted): the process ends here",
           g_timeout_s, kGraceSeconds);
  if (g_report_folder[0]) {
    snprintf(path, sizeof path, "%s/python.timeout.native.txt", g_report_folder);
    FILE* report = fopen(path, "w");
    if (report) {
      fprintf(report, "%s\n", text);
      fclose(report);
    } else {
      path[0] = 0;
    }
  }
  fprintf(stderr, "%s%s%s%s\n", text, path[0] ? " (full report: " : "", path, path[0] ? ")" : "");
  fflush(stderr);
  exit(1); /* kExitCheckFailed (reference/exit_status.h): a finding */
}

/* Waits on g_cond until the call `id` ends or `until` passes; with g_mutex held. 1 if still running. */
static int still_running_at(unsigned long id, const struct timespec* until) {
  int rc = 0;
  while (g_call_active && g_call_id == id && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g_cond, &g_mutex, until);
  return g_call_active && g_call_id == id;
}

static void* watchdog(void* unused) {
  (void)unused;
  pthread_mutex_lock(&g_mutex);
  for (;;) {
    while (!g_call_active) pthread_cond_wait(&g_cond, &g_mutex);
    const unsigned long id = g_call_id;
    if (!still_running_at(id, &g_deadline)) continue;
    g_timed_out_call = id;
    pthread_t thread;
    if (pthread_create(&thread, NULL, interrupt_kernel, (void*)(size_t)id) == 0) pthread_detach(thread);
    struct timespec last = g_deadline;
    add_seconds(&last, kGraceSeconds);
    if (still_running_at(id, &last)) end_stuck_call();
  }
  return NULL;
}

/* The pending error as "Type: text" into `out` (cleared; its traceback on stderr). PyErr_Display,
 * not PyErr_Print: PyErr_Print ends the process on a SystemExit. */
static void python_error_text(char* out, size_t size) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject* text = value ? PyObject_Str(value) : NULL;
  const char* utf8 = text ? PyUnicode_AsUTF8(text) : NULL;
  snprintf(out, size, "%s: %s", type ? ((PyTypeObject*)type)->tp_name : "error", utf8 ? utf8 : "?");
  Py_XDECREF(text);
  PyErr_Clear();
  if (type) PyErr_Display(type, value, tb);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
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
  g_timeout_type = PyObject_GetAttrString(embed, "KernelTimeout");
  PyObject* limit = PyFloat_FromDouble(g_timeout_s);
  const int limit_set = limit ? PyObject_SetAttrString(embed, "timeout_seconds", limit) : -1;
  Py_XDECREF(limit);
  PyObject* folder = PyObject_CallMethod(embed, "_report_folder", NULL);
  const char* folder_text = folder ? PyUnicode_AsUTF8(folder) : NULL;
  if (folder_text) snprintf(g_report_folder, sizeof g_report_folder, "%s", folder_text);
  Py_XDECREF(folder);
  Py_DECREF(kernel);
  Py_DECREF(load);
  Py_DECREF(numpy);
  Py_DECREF(embed);
  if (!g_run_case || !g_frombuffer || !g_timeout_type || limit_set != 0 || !folder_text) {
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
  g_kernel_thread = PyThread_get_thread_ident();
  clock_gettime(CLOCK_REALTIME, &g_deadline);
  add_seconds(&g_deadline, g_timeout_s);
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_mutex);
  PyObject* result = PyObject_CallFunction(g_run_case, "OOOOiiii", a, codes, scales, offsets, p->transform,
                                           p->step_model, p->cta_k, p->splits);
  pthread_mutex_lock(&g_mutex);
  g_call_active = 0;
  const int timed_out = g_timed_out_call == g_call_id;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_mutex);
  /* An interruption that came after the kernel's own code would fire in the next case: take it
   * back (with the GIL held, the interrupter has either set it by now or will find the call over). */
  if (timed_out) PyThreadState_SetAsyncExc(g_kernel_thread, NULL);
  if (!result && timed_out && PyErr_ExceptionMatches(g_timeout_type)) {
    /* It landed in run_case outside the kernel's call: still the kernel's timeout. */
    PyErr_Clear();
    return Py_BuildValue("(is)", 2, "python/timeout: the kernel ran past MXDIFF_PYTHON_TIMEOUT");
  }
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
