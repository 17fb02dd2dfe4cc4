//! `udpros._udpros`: the native half of the `udpros` Python package. A udpros node, its
//! subscribers and publishers, with messages as bytes or, through a `GenpyDecoder`
//! ([`genpy`]), built as genpy classes; the pure-Python `udpros` package above it gives them
//! rospy's shape.
//!
//! One tokio runtime serves every node of the interpreter; each subscriber's links run on a
//! [`DrivenRuntime`](udpros::transport::DrivenRuntime) of their own, which the thread
//! waiting in `recv` drives. A call that waits (starting a node, receiving) runs with the
//! GIL released. On the interpreter's main thread it runs in slices of [`SIGNAL_CHECK`],
//! between which Python's signal handlers run: Ctrl-C interrupts a wait with
//! `KeyboardInterrupt`. Other threads, where no handler runs, wait in one piece.

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use udpros::node::{AdvertiseOptions, FecPolicy, NodeOptions, SubscribeOptions};
use udpros::transport::Protocol;
use udpros::xmlrpc::Value;

mod genpy;

/// How long a wait on the interpreter's main thread runs with the GIL released before
/// Python's signal handlers run.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// How long a wait on this thread may run before Python's signal handlers get their turn:
/// [`SIGNAL_CHECK`] on the interpreter's main thread, the only one they run on; `None`
/// on any other, where a slice would only wake the thread for nothing: ten times a
/// second for each receiving thread of a rospy node with the import, messages or not.
/// The answer is kept per thread (a thread never becomes the main one).
fn signal_slice(py: Python<'_>) -> Option<Duration> {
    thread_local! {
        static ON_MAIN: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
    }
    let on_main = ON_MAIN.get().unwrap_or_else(|| {
        let asked = || -> PyResult<bool> {
            let threading = py.import("threading")?;
            let main: u64 = threading
                .call_method0("main_thread")?
                .getattr("ident")?
                .extract()?;
            let here: u64 = threading.call_method0("get_ident")?.extract()?;
            Ok(main == here)
        };
        // Unknown counts as the main thread: slices cost wakes, never a missed Ctrl-C.
        let on_main = asked().unwrap_or(true);
        ON_MAIN.set(Some(on_main));
        on_main
    });
    on_main.then_some(SIGNAL_CHECK)
}

/// The wait until the next signal check or `deadline`, whichever comes first; `None`:
/// no end (a thread where no signal handler runs, waiting with no deadline).
fn next_slice(signals: Option<Duration>, deadline: Option<Instant>) -> Option<Duration> {
    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    match (signals, left) {
        (Some(slice), Some(left)) => Some(slice.min(left)),
        (slice, left) => slice.or(left),
    }
}

/// `future`, given up after `limit` (`None`: never).
async fn within<F: Future>(limit: Option<Duration>, future: F) -> Option<F::Output> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, future).await.ok(),
        None => Some(future.await),
    }
}

/// The interpreter's own "is it finalizing?" (`Py_IsFinalizing` from 3.13,
/// `_Py_IsFinalizing` before), looked up once by name: the limited API has neither before
/// 3.13. `None` where the interpreter exports neither. Safe without the GIL: it reads one
/// atomic of the runtime's.
fn finalizing_probe() -> Option<unsafe extern "C" fn() -> std::os::raw::c_int> {
    static PROBE: OnceLock<Option<unsafe extern "C" fn() -> std::os::raw::c_int>> = OnceLock::new();
    *PROBE.get_or_init(|| {
        [c"Py_IsFinalizing", c"_Py_IsFinalizing"]
            .into_iter()
            .find_map(|name| {
                // SAFETY: dlsym with a NUL-terminated name; a symbol it finds by either
                // name is CPython's `int (*)(void)`.
                let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
                (!found.is_null()).then(|| unsafe {
                    std::mem::transmute::<
                        *mut libc::c_void,
                        unsafe extern "C" fn() -> std::os::raw::c_int,
                    >(found)
                })
            })
    })
}

/// Whether the interpreter is finalizing; `None` where that cannot be asked.
fn finalizing() -> Option<bool> {
    // SAFETY: see `finalizing_probe`.
    finalizing_probe().map(|probe| unsafe { probe() } != 0)
}

/// Whether the interpreter is finalizing as this module sees it (`None`: it cannot ask).
/// For the tests: `False` in a running interpreter shows the lookup worked.
#[pyfunction]
fn _finalizing() -> Option<bool> {
    finalizing()
}

/// Runs `f` in the interpreter from a thread of udpros's own (an asyncio wake, a service
/// handler), or not at all once the interpreter finalizes: `None`. Python before 3.14 ends
/// a thread that enters a finalizing interpreter with `pthread_exit`, whose unwind through
/// these native frames aborts the process.
fn attach_unless_finalizing<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    if finalizing() == Some(true) {
        return None;
    }
    Some(Python::attach(f))
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("udpros")
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

/// How a [`wait_for`] ended.
enum Waited<T> {
    /// The work finished.
    Done(T),
    /// The limit passed first.
    TimedOut,
    /// A signal handler raised (Ctrl-C's `KeyboardInterrupt`); what the work had finished
    /// with, if it finished as it was abandoned.
    Interrupted(PyErr, Option<T>),
}

/// Runs `work` on the runtime and waits for it with the GIL released, up to `limit`
/// (`None`: for as long as it takes). On the main thread, between slices of
/// [`SIGNAL_CHECK`], Python's signal handlers run, and an exception they raise abandons
/// the work ([`signal_slice`]). Work abandoned in the same
/// instant it finished gives back what it finished with (a message taken off a queue is
/// never lost to a timeout or a Ctrl-C).
fn wait_for<T: Send + 'static>(
    py: Python<'_>,
    work: impl Future<Output = T> + Send + 'static,
    limit: Option<Duration>,
) -> PyResult<Waited<T>> {
    let mut task = runtime().spawn(work);
    let deadline = limit.map(|l| Instant::now() + l);
    let finished = |done: Result<T, tokio::task::JoinError>| {
        done.map_err(|e| PyRuntimeError::new_err(format!("udpros: {e}")))
    };
    let signals = signal_slice(py);
    loop {
        let slice = next_slice(signals, deadline);
        let done = py.detach(|| runtime().block_on(within(slice, &mut task)));
        if let Some(done) = done {
            return finished(done).map(Waited::Done);
        }
        let interrupted = py.check_signals().err();
        let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
        if interrupted.is_none() && !timed_out {
            continue;
        }
        task.abort();
        let late = py.detach(|| runtime().block_on(&mut task)).ok();
        return Ok(match (interrupted, late) {
            (Some(error), late) => Waited::Interrupted(error, late),
            (None, Some(value)) => Waited::Done(value),
            (None, None) => Waited::TimedOut,
        });
    }
}

/// [`wait_for`] with no limit: the work's result, or the exception a signal handler raised.
fn wait<T: Send + 'static>(
    py: Python<'_>,
    work: impl Future<Output = T> + Send + 'static,
) -> PyResult<T> {
    match wait_for(py, work, None)? {
        Waited::Done(value) => Ok(value),
        Waited::Interrupted(error, _) => Err(error),
        Waited::TimedOut => unreachable!("no limit"),
    }
}

/// A failure of the library's as a Python `RuntimeError`.
fn runtime_error(error: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(error.to_string())
}

/// A seconds argument: finite and not negative.
fn seconds(value: Option<f64>) -> PyResult<Option<Duration>> {
    value
        .map(|s| {
            Duration::try_from_secs_f64(s)
                .map_err(|_| PyValueError::new_err(format!("timeout {s}: seconds from 0")))
        })
        .transpose()
}

fn protocols(names: Vec<String>) -> PyResult<Vec<Protocol>> {
    let protocols = names
        .iter()
        .map(|n| match n.to_ascii_lowercase().as_str() {
            "udp" | "udpros" => Ok(Protocol::Udp),
            "tcp" | "tcpros" => Ok(Protocol::Tcp),
            other => Err(PyValueError::new_err(format!(
                "transport {other:?}: 'udp' or 'tcp'"
            ))),
        })
        .collect::<PyResult<Vec<_>>>()?;
    if protocols.is_empty() {
        return Err(PyValueError::new_err(
            "transports: at least one of 'udp', 'tcp'",
        ));
    }
    Ok(protocols)
}

/// A ROS node: registered with the master named by `ROS_MASTER_URI` (or `__master:=` in
/// `args`), serving the slave API, its topics over UDPROS and TCPROS.
#[pyclass(module = "udpros._udpros", frozen)]
struct Node {
    inner: udpros::node::Node,
}

#[pymethods]
impl Node {
    /// Starts a node named `name` (resolved as roscpp resolves it; `__name:=` in `args`
    /// renames it), with ROS's command-line remappings in `args` (`__master:=URI`,
    /// `__ip:=ADDRESS`, `topic:=other`). It waits for the master as rospy does
    /// (`UDPROS_MASTER_WAIT` sets a limit); Ctrl-C ends the wait.
    #[new]
    #[pyo3(signature = (name, args = Vec::new()))]
    fn new(py: Python<'_>, name: String, args: Vec<String>) -> PyResult<Node> {
        let parsed = udpros::node::args::NodeArgs::parse(&args)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let id = udpros::node::args::NodeIdentity::from_args(&name, &parsed)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let options = NodeOptions {
            // Python's own handlers take Ctrl-C; the node shuts down with `shutdown()` or
            // when the interpreter leaves.
            handle_signals: false,
            ..NodeOptions::default()
        };
        let started = wait(py, udpros::node::Node::with_options(id, options))?;
        let inner = started.map_err(runtime_error)?;
        Ok(Node { inner })
    }

    /// The node's resolved name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// The node's slave API URI.
    #[getter]
    fn uri(&self) -> String {
        self.inner.uri().to_string()
    }

    /// Subscribes to `topic`. `msg_type` and `md5sum` as the publisher must match (`"*"`:
    /// any); `transports` in order of preference; `fec` asks udpros publishers for forward
    /// error correction on UDPROS; at most `queue_size` messages wait, the oldest dropped.
    #[pyo3(signature = (topic, msg_type = "*".to_string(), md5sum = "*".to_string(), definition = String::new(), transports = vec!["udp".to_string(), "tcp".to_string()], fec = true, queue_size = 100))]
    #[allow(clippy::too_many_arguments)]
    fn subscribe(
        &self,
        py: Python<'_>,
        topic: String,
        msg_type: String,
        md5sum: String,
        definition: String,
        transports: Vec<String>,
        fec: bool,
        queue_size: usize,
    ) -> PyResult<Subscriber> {
        let options = subscribe_options(transports, fec, queue_size)?;
        let node = self.inner.clone();
        let subscribed = wait(py, async move {
            node.subscribe_raw_as(&topic, &msg_type, &md5sum, &definition, options)
                .await
        })?;
        let raw = subscribed.map_err(runtime_error)?;
        Ok(Subscriber::new(raw))
    }

    /// Advertises `topic` of `msg_type` (its `md5sum` and full `definition`, as genpy
    /// classes carry them in `_md5sum` and `_full_text`); `latch` keeps the last message for
    /// subscribers that come later.
    #[pyo3(signature = (topic, msg_type, md5sum, definition, latch = false))]
    fn advertise(
        &self,
        py: Python<'_>,
        topic: String,
        msg_type: String,
        md5sum: String,
        definition: String,
        latch: bool,
    ) -> PyResult<Publisher> {
        let node = self.inner.clone();
        let options = AdvertiseOptions {
            latch,
            ..AdvertiseOptions::default()
        };
        let advertised = wait(py, async move {
            node.advertise_raw(&topic, &msg_type, &md5sum, &definition, options)
                .await
        })?;
        let raw = advertised.map_err(runtime_error)?;
        Ok(Publisher { raw })
    }

    /// A client of the service `name` (`md5sum` as the server must match, `"*"` for any);
    /// `timeout` bounds each whole call (`None`: the library's own deadlines only).
    #[pyo3(signature = (name, md5sum = "*".to_string(), timeout = None))]
    fn service_client(
        &self,
        name: String,
        md5sum: String,
        timeout: Option<f64>,
    ) -> PyResult<ServiceClient> {
        let options = udpros::service::ClientOptions {
            timeout: seconds(timeout)?,
            ..udpros::service::ClientOptions::default()
        };
        let raw = self.inner.service_client_raw(&name, &md5sum, options);
        Ok(ServiceClient { raw: Arc::new(raw) })
    }

    /// Serves the service `name` of `service_type` (`md5sum` its service md5): `handler`
    /// is called with each request's bytes and returns the response's bytes; an exception
    /// it raises fails that call, with its text, as rospy's server does.
    fn advertise_service(
        &self,
        py: Python<'_>,
        name: String,
        service_type: String,
        md5sum: String,
        handler: Py<PyAny>,
    ) -> PyResult<ServiceServer> {
        let handler = Arc::new(handler);
        let node = self.inner.clone();
        let serve = move |request: bytes::Bytes| {
            let handler = handler.clone();
            async move {
                // The handler is Python: it runs on a blocking thread, holding the GIL.
                tokio::task::spawn_blocking(move || {
                    attach_unless_finalizing(|py| -> Result<Vec<u8>, String> {
                        let answer = handler
                            .call1(py, (PyBytes::new(py, &request),))
                            .map_err(|e| e.to_string())?;
                        answer
                            .extract::<Vec<u8>>(py)
                            .map_err(|_| "the handler returned no bytes".to_string())
                    })
                    .unwrap_or_else(|| Err("the server's interpreter is finalizing".to_string()))
                })
                .await
                .map_err(|e| format!("the handler did not finish: {e}"))?
            }
        };
        let advertised = wait(py, async move {
            node.advertise_service_raw(
                &name,
                &service_type,
                &md5sum,
                udpros::service::ServerOptions::default(),
                serve,
            )
            .await
        })?;
        let raw = advertised.map_err(runtime_error)?;
        Ok(ServiceServer { raw })
    }

    /// The parameter `key` (resolved as rospy resolves it: `~x` is this node's own) as
    /// Python values, `None` when the parameter server has none.
    fn get_param<'py>(&self, py: Python<'py>, key: String) -> PyResult<Option<Bound<'py, PyAny>>> {
        let node = self.inner.clone();
        let got = wait(py, async move { node.get_param(&key).await })?;
        let value = got.map_err(runtime_error)?;
        value.map(|v| to_python(py, &v)).transpose()
    }

    /// Sets the parameter `key` to `value`: a bool, an int of 32 bits, a float, a str,
    /// bytes, a list or tuple of these, or a dict of str keys to these (XML-RPC's types).
    fn set_param(&self, py: Python<'_>, key: String, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let value = from_python(value, 0)?;
        let node = self.inner.clone();
        let set = wait(py, async move { node.set_param(&key, value).await })?;
        set.map_err(runtime_error)
    }

    /// Unregisters everything and stops the node.
    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        let node = self.inner.clone();
        wait(py, async move { node.shutdown().await })?;
        Ok(())
    }

    /// Whether the node shut down, or was asked to (by `shutdown`, the master, `rosnode
    /// kill`).
    #[getter]
    fn is_shutdown(&self) -> bool {
        self.inner.is_shutdown()
    }

    /// Waits until something asks the node to shut down (`shutdown` from another thread,
    /// the master, `rosnode kill`) and returns the reason; Ctrl-C ends the wait with
    /// `KeyboardInterrupt`.
    fn wait_for_shutdown(&self, py: Python<'_>) -> PyResult<String> {
        let node = self.inner.clone();
        wait(py, async move { node.shutdown_requested().await })
    }
}

/// How deep a parameter's lists and dicts may nest: a list that holds itself has no end.
const MAX_PARAM_DEPTH: usize = 64;

fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        Value::String(s) | Value::DateTime(s) => s.into_pyobject(py)?.into_any(),
        Value::Double(d) => d.into_pyobject(py)?.into_any(),
        Value::Base64(b) => PyBytes::new(py, b).into_any(),
        Value::Array(items) => {
            let list = pyo3::types::PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Struct(fields) => {
            let dict = pyo3::types::PyDict::new(py);
            for (key, item) in fields {
                dict.set_item(key, to_python(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

fn from_python(value: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
    if depth > MAX_PARAM_DEPTH {
        return Err(PyValueError::new_err(format!(
            "a parameter nested more than {MAX_PARAM_DEPTH} deep"
        )));
    }
    if value.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(value.extract()?));
    }
    if value.is_instance_of::<PyInt>() {
        let int: i64 = value.extract()?;
        return i32::try_from(int).map(Value::Int).map_err(|_| {
            pyo3::exceptions::PyOverflowError::new_err(format!(
                "{int} exceeds XML-RPC's 32-bit ints"
            ))
        });
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(Value::Double(value.extract()?));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(Value::String(value.extract()?));
    }
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(Value::Base64(bytes.as_bytes().to_vec()));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items = value
            .try_iter()?
            .map(|item| from_python(&item?, depth + 1))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(Value::Array(items));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut fields = std::collections::BTreeMap::new();
        for (key, item) in dict.iter() {
            let key: String = key
                .extract()
                .map_err(|_| PyTypeError::new_err("a parameter dict's keys are str"))?;
            fields.insert(key, from_python(&item, depth + 1)?);
        }
        return Ok(Value::Struct(fields));
    }
    Err(PyTypeError::new_err(format!(
        "a parameter cannot be a {}",
        value.get_type().name()?
    )))
}

/// A subscription: messages as the bytes their publisher serialized.
#[pyclass(module = "udpros._udpros", frozen)]
struct Subscriber {
    raw: Arc<udpros::node::RawSubscriber>,
    intake: Arc<Intake>,
}

/// How a subscriber's receives take turns, so that messages reach Python in the order
/// they arrived and none is lost to a wait abandoned as its message came.
#[derive(Default)]
struct Intake {
    /// Held by a receive from before it takes a message until it has handed it on (or
    /// back): a receive that starts meanwhile waits its turn.
    turn: tokio::sync::Mutex<()>,
    /// Messages taken for a wait that was then abandoned (a timeout or a Ctrl-C in the
    /// same instant, a cancelled `await`), in the order they were taken; the next receive
    /// gets them first. At most one per abandoned wait.
    returned: std::sync::Mutex<std::collections::VecDeque<(u64, bytes::Bytes)>>,
    /// Messages taken so far: each one's place in that order.
    taken: std::sync::atomic::AtomicU64,
}

/// A message and its place in the order messages were taken.
type Taken = (u64, bytes::Bytes);

impl Intake {
    /// The next message, in turn: one given back first, else the queue's; `None` once the
    /// node shut down. The turn is held until the returned guard drops.
    async fn next(
        &self,
        raw: &udpros::node::RawSubscriber,
    ) -> (tokio::sync::MutexGuard<'_, ()>, Option<Taken>) {
        let turn = self.turn.lock().await;
        if let Some(message) = self.lock_returned().pop_front() {
            return (turn, Some(message));
        }
        let message = raw.recv().await.map(|m| {
            let order = self
                .taken
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (order, m.body)
        });
        (turn, message)
    }

    fn lock_returned(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<Taken>> {
        self.returned.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts a message back, before every later one given back.
    fn give_back(&self, (order, message): Taken) {
        let mut returned = self.lock_returned();
        let at = returned.partition_point(|(o, _)| *o < order);
        returned.insert(at, (order, message));
    }
}

impl Subscriber {
    fn new(raw: udpros::node::RawSubscriber) -> Subscriber {
        Subscriber {
            raw: Arc::new(raw),
            intake: Arc::default(),
        }
    }

    /// The next message, waiting up to `timeout` seconds (`None`: until one comes);
    /// `None` when the time passed, `EOFError` once the subscription ended (its node
    /// shut down, it was closed, or a guest's one link gave up for good).
    fn receive(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<bytes::Bytes>> {
        // The wait runs on this thread, in the `block_on` of the runtime the links run on
        // (`links_on`): the kernel wakes this thread for the datagrams, which it reads and
        // reassembles itself, with no other thread woken (S3, 100 kB from a udpros
        // publisher over UDPROS: 3.6 context switches per message fell to 1.25, the Python
        // subscriber's CPU per message from 223 to about 170 µs). A slice that ends drops
        // the wait, which takes nothing until it returns the message it took.
        let deadline = seconds(timeout)?.map(|limit| Instant::now() + limit);
        let (raw, intake) = (&*self.raw, &*self.intake);
        let signals = signal_slice(py);
        loop {
            let slice = next_slice(signals, deadline);
            let wait = within(slice, async { intake.next(raw).await.1 });
            let received = py.detach(|| match raw.links_on() {
                Some(links) => links.block_on(wait),
                None => runtime().block_on(wait),
            });
            match received {
                Some(None) => {
                    return Err(pyo3::exceptions::PyEOFError::new_err(
                        "the subscription ended",
                    ))
                }
                Some(Some((_, message))) => return Ok(Some(message)),
                None => {}
            }
            // Ctrl-C's KeyboardInterrupt, raised between slices: nothing was taken.
            py.check_signals()?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }
}

#[pymethods]
impl Subscriber {
    /// The next message's bytes, waiting up to `timeout` seconds (`None`: until one comes);
    /// `None` when the time passed. Raises `EOFError` once the subscription ended.
    #[pyo3(signature = (timeout = None))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        Ok(self
            .receive(py, timeout)?
            .map(|message| PyBytes::new(py, &message)))
    }

    /// The next message as `(message, size)`: built by `decoder` (a `GenpyDecoder`) where
    /// it can, else its bytes, which the caller hands to genpy; `size` is its length in
    /// bytes. Waits as `recv` does, and is `None` when the time passed. Raises
    /// `UndecodableMessage` for a message the decoder refused (it is gone).
    #[pyo3(signature = (decoder, timeout = None))]
    fn recv_message<'py>(
        &self,
        py: Python<'py>,
        decoder: &genpy::GenpyDecoder,
        timeout: Option<f64>,
    ) -> PyResult<Option<(Bound<'py, PyAny>, usize)>> {
        let Some(data) = self.receive(py, timeout)? else {
            return Ok(None);
        };
        let message = match decoder.build(py, &data)? {
            Some(message) => message,
            None => PyBytes::new(py, &data).into_any(),
        };
        Ok(Some((message, data.len())))
    }

    /// Hands each message to `callback(message, *args)` until the subscription ends: the
    /// loop of a subscriber's callback thread, with no Python frame between the wait and
    /// the callback (S3, 100 kB at 100 Hz: the Python loop it replaced took 4 to 10 µs more
    /// from the built message to the callback, its bytecode cold after every wait). A
    /// message is built by `decoder` where it can, else by `from_bytes(data)`, whose
    /// `None` skips it; one the decoder refuses goes to `undecodable(error)`. An
    /// `Exception` the callback raises goes to `raised(error)` and the next message comes;
    /// any other (`SystemExit`) ends the loop with it.
    #[pyo3(signature = (decoder, callback, args, from_bytes, undecodable, raised))]
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &self,
        py: Python<'_>,
        decoder: Option<PyRef<'_, genpy::GenpyDecoder>>,
        callback: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        from_bytes: &Bound<'_, PyAny>,
        undecodable: &Bound<'_, PyAny>,
        raised: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        loop {
            let data = match self.receive(py, None) {
                Ok(Some(data)) => data,
                Ok(None) => continue,
                Err(ended) if ended.is_instance_of::<pyo3::exceptions::PyEOFError>(py) => {
                    return Ok(())
                }
                Err(error) => return Err(error),
            };
            let built = match &decoder {
                Some(decoder) => match decoder.build(py, &data) {
                    Ok(built) => built,
                    Err(refused) if refused.is_instance_of::<genpy::UndecodableMessage>(py) => {
                        undecodable.call1((refused,))?;
                        continue;
                    }
                    Err(error) => return Err(error),
                },
                None => None,
            };
            let message = match built {
                Some(message) => message,
                None => {
                    let message = from_bytes.call1((PyBytes::new(py, &data),))?;
                    if message.is_none() {
                        continue;
                    }
                    message
                }
            };
            let called = if args.is_empty() {
                callback.call1((message,))
            } else {
                let mut all = Vec::with_capacity(1 + args.len());
                all.push(message);
                all.extend(args.iter());
                callback.call1(PyTuple::new(py, all)?)
            };
            if let Err(error) = called {
                if !error.is_instance_of::<pyo3::exceptions::PyException>(py) {
                    return Err(error);
                }
                raised.call1((error,))?;
            }
        }
    }

    /// Starts receiving the next message for asyncio. When it has come (or the node shut
    /// down), `wake(future)` is called on `event_loop`'s thread (`call_soon_threadsafe`),
    /// and the returned handle's `take()` gives it. `cancel()` stops the wait; a message
    /// that came but was not taken goes back to the next receive, in its place.
    fn recv_async(
        &self,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        wake: Py<PyAny>,
    ) -> AsyncReceive {
        let (raw, intake) = (self.raw.clone(), self.intake.clone());
        let slot = Arc::new(std::sync::Mutex::new(Slot::default()));
        // On the links' runtime when they have one: the thread that reads a message then
        // hands it to the event loop itself.
        let on = raw
            .links_on()
            .map_or_else(|| runtime().handle().clone(), |l| l.handle().clone());
        let task = on.spawn({
            let slot = slot.clone();
            async move {
                let (turn, message) = intake.next(&raw).await;
                {
                    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
                    match message {
                        Some(message) if slot.cancelled => {
                            intake.give_back(message);
                            return;
                        }
                        Some(message) => slot.ready = Some(message),
                        None => slot.ended = true,
                    }
                }
                drop(turn);
                attach_unless_finalizing(|py| {
                    // A loop that closed meanwhile has nobody to tell.
                    let _ = event_loop.call_method1(py, "call_soon_threadsafe", (wake, future));
                });
            }
        });
        AsyncReceive {
            task: task.abort_handle(),
            slot,
            intake: self.intake.clone(),
        }
    }

    /// The resolved topic.
    #[getter]
    fn topic(&self) -> String {
        self.raw.topic().to_string()
    }

    /// Each publisher link: `(publisher URI, "UDPROS" or "TCPROS" or "", connected)`.
    fn links(&self) -> Vec<(String, String, bool)> {
        self.raw
            .links()
            .into_iter()
            .map(|l| (l.publisher_uri, ros_name(l.protocol), l.connected))
            .collect()
    }

    /// `(messages, bytes)` received over all its publisher links so far: what rospy's
    /// statistics and `getBusStats` count for a connection.
    fn received(&self) -> (u64, u64) {
        self.raw
            .links()
            .iter()
            .fold((0, 0), |(m, b), l| (m + l.messages, b + l.bytes))
    }

    /// Each publisher link in full, a dict: `uri`, `transport` ("UDPROS", "TCPROS" or ""
    /// before it is negotiated), `connected`, `ended` (the link stopped trying: the
    /// publisher refused it for good), `local_port`, `peer` ("host:port" or ""),
    /// `messages`, `bytes`, `header` (the publisher's connection header, a dict of str),
    /// and on UDPROS `incomplete`, `missed` and `rebuilt` (by FEC) messages.
    fn link_info<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.raw
            .links()
            .into_iter()
            .map(|l| {
                let info = PyDict::new(py);
                info.set_item("uri", l.publisher_uri)?;
                info.set_item("transport", ros_name(l.protocol))?;
                info.set_item("connected", l.connected)?;
                info.set_item("ended", l.ended)?;
                info.set_item("local_port", l.local_port)?;
                info.set_item("peer", l.peer.map(|p| p.to_string()).unwrap_or_default())?;
                info.set_item("messages", l.messages)?;
                info.set_item("bytes", l.bytes)?;
                let header = PyDict::new(py);
                for (field, value) in l.header.iter().flat_map(|h| h.iter()) {
                    header.set_item(field, value)?;
                }
                info.set_item("header", header)?;
                info.set_item("incomplete", l.udp.incomplete)?;
                info.set_item("missed", l.udp.missed)?;
                info.set_item("rebuilt", l.udp.rebuilt)?;
                Ok(info)
            })
            .collect()
    }

    /// Stops receiving: `recv` raises `EOFError` from here on, and a link of its own (a
    /// guest's) closes.
    fn close(&self) {
        self.raw.close();
    }
}

/// A transport's name as ROS says it, "" when not yet negotiated.
fn ros_name(protocol: Option<Protocol>) -> String {
    protocol.map_or("", Protocol::ros_name).to_string()
}

/// What an asyncio receive holds once its message came.
#[derive(Default)]
struct Slot {
    ready: Option<Taken>,
    ended: bool,
    cancelled: bool,
}

/// An asyncio receive under way ([`Subscriber::recv_async`]).
#[pyclass(module = "udpros._udpros", frozen)]
struct AsyncReceive {
    task: tokio::task::AbortHandle,
    slot: Arc<std::sync::Mutex<Slot>>,
    intake: Arc<Intake>,
}

#[pymethods]
impl AsyncReceive {
    /// The message that came, once `wake` was called; `None` when the node shut down.
    fn take<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        match slot.ready.take() {
            Some((_, message)) => Ok(Some(PyBytes::new(py, &message))),
            None if slot.ended => Ok(None),
            None => Err(PyRuntimeError::new_err("no message has come yet")),
        }
    }

    /// Stops waiting; a message that came and was not taken goes back to the next receive.
    fn cancel(&self) {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        slot.cancelled = true;
        if let Some(message) = slot.ready.take() {
            self.intake.give_back(message);
        }
        self.task.abort();
    }
}

/// A publication: messages given as their serialized bytes.
#[pyclass(module = "udpros._udpros", frozen)]
struct Publisher {
    raw: udpros::node::RawPublisher,
}

#[pymethods]
impl Publisher {
    /// Sends one serialized message to every subscriber.
    fn publish(&self, data: &[u8]) {
        self.raw.publish_body(data);
    }

    /// Subscribers linked now.
    fn num_subscribers(&self) -> usize {
        self.raw.num_subscribers()
    }
}

/// A client of one service, with requests and responses as bytes.
#[pyclass(module = "udpros._udpros", frozen)]
struct ServiceClient {
    raw: Arc<udpros::service::RawServiceClient>,
}

#[pymethods]
impl ServiceClient {
    /// Calls with a serialized request; the serialized response. A service nobody serves,
    /// a refused or failed call, a timeout: `ServiceError` (its text says which).
    fn call<'py>(&self, py: Python<'py>, request: Vec<u8>) -> PyResult<Bound<'py, PyBytes>> {
        let raw = self.raw.clone();
        let answered = wait(py, async move { raw.call(&request).await })?;
        let response = answered.map_err(|e| ServiceError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &response))
    }

    /// Starts a call for asyncio: when it has an answer (or failed), `wake(future)` is
    /// called on `event_loop`'s thread (`call_soon_threadsafe`), and the returned handle's
    /// `take()` gives the response or raises `ServiceError`. `cancel()` abandons it.
    fn call_async(
        &self,
        request: Vec<u8>,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        wake: Py<PyAny>,
    ) -> AsyncCall {
        let raw = self.raw.clone();
        let answer = Arc::new(std::sync::Mutex::new(None));
        let task = runtime().spawn({
            let answer = answer.clone();
            async move {
                let answered = raw.call(&request).await.map_err(|e| e.to_string());
                *answer.lock().unwrap_or_else(|e| e.into_inner()) = Some(answered);
                attach_unless_finalizing(|py| {
                    // A loop that closed meanwhile has nobody to tell.
                    let _ = event_loop.call_method1(py, "call_soon_threadsafe", (wake, future));
                });
            }
        });
        AsyncCall {
            task: task.abort_handle(),
            answer,
        }
    }

    /// The resolved service name.
    #[getter]
    fn service(&self) -> String {
        self.raw.service().to_string()
    }
}

/// An asyncio service call under way ([`ServiceClient::call_async`]).
#[pyclass(module = "udpros._udpros", frozen)]
struct AsyncCall {
    task: tokio::task::AbortHandle,
    answer: Arc<std::sync::Mutex<Option<Result<bytes::Bytes, String>>>>,
}

#[pymethods]
impl AsyncCall {
    /// The response's bytes, once `wake` was called; `ServiceError` when the call failed.
    fn take<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        match self.answer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(Ok(response)) => Ok(PyBytes::new(py, &response)),
            Some(Err(why)) => Err(ServiceError::new_err(why)),
            None => Err(PyRuntimeError::new_err("the call has not answered yet")),
        }
    }

    /// Abandons the call (its connection is dropped; the server may still have served it).
    fn cancel(&self) {
        self.task.abort();
    }
}

/// A service this node serves; dropping it (or the node's shutdown) stops serving it.
#[pyclass(module = "udpros._udpros", frozen)]
struct ServiceServer {
    raw: udpros::node::RawServiceServer,
}

#[pymethods]
impl ServiceServer {
    /// Calls answered so far.
    fn calls(&self) -> u64 {
        self.raw.calls()
    }
}

/// A message type known at run time, from the messages udpros ships, the `.msg` files of
/// an installed ROS, or a full definition as a connection header carries it: what decodes
/// messages where genpy is missing.
#[pyclass(module = "udpros._udpros", frozen)]
struct MessageType {
    inner: udpros::msg::dynamic::DynamicType,
}

/// The Python classes decoded messages are made of (`udpros.message`).
struct Makers<'py> {
    message: Bound<'py, PyAny>,
    time: Bound<'py, PyAny>,
    duration: Bound<'py, PyAny>,
}

/// How deep decoded messages nest: the decoder bounds it already; this bounds the
/// recursion that turns them into Python objects the same way.
const MAX_MESSAGE_DEPTH: usize = 128;

impl<'py> Makers<'py> {
    fn new(py: Python<'py>) -> PyResult<Makers<'py>> {
        let module = py.import("udpros.message")?;
        Ok(Makers {
            message: module.getattr("Message")?,
            time: module.getattr("Time")?,
            duration: module.getattr("Duration")?,
        })
    }

    fn make(
        &self,
        py: Python<'py>,
        value: &udpros::msg::dynamic::Value,
        depth: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        use udpros::msg::dynamic::Value as V;
        if depth > MAX_MESSAGE_DEPTH {
            return Err(PyValueError::new_err("a message nested too deep"));
        }
        Ok(match value {
            V::String(text) => text.into_pyobject(py)?.into_any(),
            V::Time(t) => self.time.call1((t.sec, t.nsec))?,
            V::Duration(d) => self.duration.call1((d.sec, d.nsec))?,
            V::Bytes(b) | V::Chars(b) => PyBytes::new(py, b).into_any(),
            V::Array(items) => {
                let list = pyo3::types::PyList::empty(py);
                for item in items {
                    list.append(self.make(py, item, depth + 1)?)?;
                }
                list.into_any()
            }
            V::Message(fields) => {
                let kwargs = PyDict::new(py);
                for (name, item) in fields {
                    kwargs.set_item(name, self.make(py, item, depth + 1)?)?;
                }
                self.message.call((), Some(&kwargs))?
            }
            number => genpy::number(py, number)?
                .ok_or_else(|| PyValueError::new_err("a value of no known kind"))?,
        })
    }
}

/// A message given in Python (`udpros.message.Message` or a dict of fields, nested alike;
/// lists and tuples for arrays; bytes for `uint8[]`; `udpros.message.Time` and `Duration`
/// or `{secs, nsecs}` for times) as the YAML tree `rostopic pub` would take for it, which
/// the type then checks field by field. `message` is the `udpros.message.Message` class.
/// Nesting is bounded as decoding's is: a list that holds itself is a `ValueError`, not an
/// overflowed stack.
fn yaml_from_python(
    value: &Bound<'_, PyAny>,
    message: &Bound<'_, PyAny>,
    depth: usize,
) -> PyResult<udpros::yaml::Yaml> {
    use pyo3::types::{PyBool, PyByteArray, PyFloat, PyInt, PyList, PyString, PyTuple};
    use udpros::yaml::Yaml;
    if depth > MAX_MESSAGE_DEPTH {
        return Err(PyValueError::new_err("a message nested too deep"));
    }
    if value.is_none() {
        return Ok(Yaml::Null);
    }
    if value.is_instance_of::<PyBool>() {
        return Ok(Yaml::Bool(value.extract()?));
    }
    if value.is_instance_of::<PyInt>() {
        return Ok(Yaml::Int(value.extract()?));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(Yaml::Float(value.extract()?));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(Yaml::Str(value.extract()?));
    }
    // Bytes stay bytes: as a list of integers, a 10 MB image took 32 times its size.
    if let Ok(raw) = value.cast::<PyBytes>() {
        return Ok(Yaml::Binary(raw.as_bytes().to_vec()));
    }
    if let Ok(raw) = value.cast::<PyByteArray>() {
        return Ok(Yaml::Binary(raw.to_vec()));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items = value
            .try_iter()?
            .map(|item| yaml_from_python(&item?, message, depth + 1))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(Yaml::Seq(items));
    }
    let fields = if let Ok(dict) = value.cast::<PyDict>() {
        dict.clone()
    } else if value.is_instance(message)? {
        value.getattr("__dict__")?.cast_into::<PyDict>()?
    } else if value.hasattr("secs")? && value.hasattr("nsecs")? {
        let stamp = PyDict::new(value.py());
        stamp.set_item("secs", value.getattr("secs")?)?;
        stamp.set_item("nsecs", value.getattr("nsecs")?)?;
        stamp
    } else {
        return Err(PyTypeError::new_err(format!(
            "a message field cannot be a {}",
            value.get_type().name()?
        )));
    };
    let mut pairs = Vec::with_capacity(fields.len());
    for (key, item) in fields.iter() {
        let key: String = key
            .extract()
            .map_err(|_| PyTypeError::new_err("a message's field names are str"))?;
        pairs.push((key, yaml_from_python(&item, message, depth + 1)?));
    }
    Ok(Yaml::Map(pairs))
}

#[pymethods]
impl MessageType {
    /// The type `type_name` (`pkg/Name`): from `definition` (its full text, as a
    /// connection header's `message_definition`) when given, else one udpros ships or an
    /// installed ROS has. An unknown type or a definition that does not parse is a
    /// `ValueError`.
    #[new]
    #[pyo3(signature = (type_name, definition = None))]
    fn new(type_name: &str, definition: Option<&str>) -> PyResult<MessageType> {
        let found = match definition {
            Some(text) => udpros::msg::dynamic::DynamicType::from_definition(type_name, text),
            None => udpros::msg::find_type(type_name),
        };
        let inner = found.map_err(|e| PyValueError::new_err(format!("{type_name}: {e}")))?;
        Ok(MessageType { inner })
    }

    /// `pkg/Name`.
    #[getter]
    fn type_name(&self) -> String {
        self.inner.type_name().to_string()
    }

    /// The md5sum genmsg computes for it.
    #[getter]
    fn md5sum(&self) -> String {
        self.inner.md5sum().to_string()
    }

    /// The full definition, as genmsg writes it.
    #[getter]
    fn definition(&self) -> PyResult<String> {
        self.inner
            .definition()
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// One serialized message as a `udpros.message.Message` (fields as attributes; nested
    /// messages alike; `time` and `duration` as `udpros.message.Time` and `Duration`;
    /// `uint8[]` as bytes). Bytes that are no such message are a `ValueError`.
    fn decode<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        let value = self
            .inner
            .decode(&bytes::Bytes::copy_from_slice(data))
            .map_err(|e| PyValueError::new_err(format!("{}: {e}", self.inner.type_name())))?;
        Makers::new(py)?.make(py, &value, 0)
    }

    /// `message` serialized as this type: a `udpros.message.Message` (what `decode` gives)
    /// or a dict of fields, nested alike, with lists for arrays, bytes for `uint8[]` and
    /// `udpros.message.Time` or `{secs, nsecs}` for times. Missing fields take their
    /// defaults, as in `rostopic pub`; a field the type lacks or of the wrong kind is a
    /// `ValueError`, a value of no message kind a `TypeError`.
    fn encode<'py>(
        &self,
        py: Python<'py>,
        message: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let wrong = |e: udpros::msg::dynamic::DynamicError| {
            PyValueError::new_err(format!("{}: {e}", self.inner.type_name()))
        };
        let yaml = yaml_from_python(message, &Makers::new(py)?.message, 0)?;
        let value = self.inner.value_from_yaml(Some(&yaml)).map_err(wrong)?;
        let body = self.inner.encode(&value).map_err(wrong)?;
        Ok(PyBytes::new(py, &body))
    }
}

/// udpros's links lent to a node another library runs (rospy): see `udpros.rospy`.
#[pyclass(module = "udpros._udpros", frozen)]
struct Guest {
    inner: Arc<udpros::guest::Guest>,
}

#[pymethods]
impl Guest {
    /// A guest of the node `node_name` (its resolved name) whose URIs advertise `host`.
    #[new]
    fn new(node_name: &str, host: &str) -> PyResult<Guest> {
        let _runtime = runtime().enter();
        let inner = udpros::guest::Guest::new(node_name, host, AdvertiseOptions::default())
            .map_err(runtime_error)?;
        Ok(Guest {
            inner: Arc::new(inner),
        })
    }

    /// A link to the publisher at `publisher_uri` for `topic` (the subscriber's type,
    /// md5sum and full definition), negotiated in the order of `transports`, FEC asked of
    /// udpros publishers when `fec`, at most `queue_size` messages waiting: a `Subscriber`
    /// with that one link, which closes with it.
    #[pyo3(signature = (publisher_uri, topic, msg_type, md5sum, definition, transports = vec!["udp".to_string(), "tcp".to_string()], fec = true, queue_size = 100))]
    #[allow(clippy::too_many_arguments)]
    fn link_to_publisher(
        &self,
        publisher_uri: &str,
        topic: &str,
        msg_type: &str,
        md5sum: &str,
        definition: &str,
        transports: Vec<String>,
        fec: bool,
        queue_size: usize,
    ) -> PyResult<Subscriber> {
        let options = subscribe_options(transports, fec, queue_size)?;
        let _runtime = runtime().enter();
        let raw = self.inner.link_to_publisher(
            publisher_uri,
            topic,
            msg_type,
            md5sum,
            definition,
            options,
        );
        Ok(Subscriber::new(raw))
    }

    /// Answers a subscriber's UDPROS offer (`offer`: its `requestTopic` entry, the header
    /// as bytes) for `topic` of this node: `(answer entry, link)`, the header in the answer
    /// as bytes. A refusal raises `ValueError` with its reason.
    #[pyo3(signature = (topic, msg_type, md5sum, definition, latch, offer))]
    #[allow(clippy::too_many_arguments)]
    fn answer_udpros<'py>(
        &self,
        py: Python<'py>,
        topic: String,
        msg_type: String,
        md5sum: String,
        definition: String,
        latch: bool,
        offer: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, GuestLink)> {
        let Value::Array(offer) = from_python(offer, 0)? else {
            return Err(PyTypeError::new_err("an offer is a list"));
        };
        let published = udpros::guest::PublishedTopic {
            topic,
            msg_type,
            md5sum,
            definition,
            latch,
        };
        let guest = self.inner.clone();
        let answered = wait(
            py,
            async move { guest.answer_udpros(&published, &offer).await },
        )?;
        let (entry, link) = answered.map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok((
            to_python(py, &Value::Array(entry))?,
            GuestLink { inner: link },
        ))
    }
}

/// One UDPROS link from a rospy publisher to a subscriber.
#[pyclass(module = "udpros._udpros", frozen)]
struct GuestLink {
    inner: udpros::guest::GuestLink,
}

#[pymethods]
impl GuestLink {
    /// Sends a serialized message with its 4-byte length prefix (rospy's buffer); never
    /// waits. False once the link closed (the subscriber left).
    fn send(&self, py: Python<'_>, frame: &[u8]) -> bool {
        py.detach(|| self.inner.send(frame))
    }

    /// Whether the link closed.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Closes the link (a udpros subscriber is told).
    fn close(&self) {
        self.inner.close();
    }

    /// The answer's connection id.
    #[getter]
    fn id(&self) -> u32 {
        self.inner.id()
    }

    /// The local port the link sends from.
    #[getter]
    fn local_port(&self) -> u16 {
        self.inner.local_port()
    }

    /// Where the link sends, "host:port".
    #[getter]
    fn peer(&self) -> String {
        self.inner.stats().peer.to_string()
    }

    /// The subscriber's node name.
    #[getter]
    fn caller_id(&self) -> String {
        self.inner.stats().caller_id
    }

    /// `(messages, bytes, dropped)` so far.
    fn counts(&self) -> (u64, u64, u64) {
        let stats = self.inner.stats();
        (stats.messages, stats.bytes, stats.drops)
    }

    /// Whether the link carries FEC.
    #[getter]
    fn fec(&self) -> bool {
        self.inner.stats().fec.is_some()
    }
}

/// A subscriber's options from the binding's arguments: `transports` by name, most wanted
/// first; FEC asked of udpros publishers or not; at most `queue_size` (at least one)
/// messages waiting.
fn subscribe_options(
    transports: Vec<String>,
    fec: bool,
    queue_size: usize,
) -> PyResult<SubscribeOptions> {
    let transports = protocols(transports)?;
    let links = udpros::transport::DrivenRuntime::new("udpros-links").map_err(runtime_error)?;
    Ok(SubscribeOptions {
        links_on: Some(Arc::new(links)),
        transports,
        queue_size: queue_size.max(1),
        fec: if fec {
            FecPolicy::default()
        } else {
            FecPolicy::Off
        },
        ..SubscribeOptions::default()
    })
}

pyo3::create_exception!(
    _udpros,
    ServiceError,
    pyo3::exceptions::PyException,
    "A service call that did not succeed."
);

#[pymodule]
fn _udpros(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(_finalizing, module)?)?;
    module.add_class::<Node>()?;
    module.add_class::<Subscriber>()?;
    module.add_class::<AsyncReceive>()?;
    module.add_class::<Publisher>()?;
    module.add_class::<ServiceClient>()?;
    module.add_class::<AsyncCall>()?;
    module.add_class::<ServiceServer>()?;
    module.add_class::<Guest>()?;
    module.add_class::<MessageType>()?;
    module.add_class::<genpy::GenpyDecoder>()?;
    module.add_class::<GuestLink>()?;
    module.add("ServiceError", module.py().get_type::<ServiceError>())?;
    module.add(
        "UndecodableMessage",
        module.py().get_type::<genpy::UndecodableMessage>(),
    )?;
    module.add(
        "MAX_PUBLISHER_LINKS",
        udpros::transport::MAX_PUBLISHER_LINKS,
    )?;
    Ok(())
}
