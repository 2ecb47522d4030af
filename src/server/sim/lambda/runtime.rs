//! Lambda's execution environments, on loopback: each one is a process of
//! the function's own binary (`northwind-ops lambda`), started with the
//! environment Lambda gives a function, and a Lambda Runtime API served here
//! for it alone (its published HTTP interface: the next invocation, its
//! response, its error, an initialisation error). An environment runs one
//! invocation at a time, as Lambda's do; a function that exits, or runs past
//! its timeout, is stopped by its pid and its environment is not used again.

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

const RUNTIME: &str = "/2018-06-01/runtime";
/// The account local ARNs name.
pub const LOCAL_ACCOUNT: &str = "000000000000";
pub const LOCAL_REGION: &str = "us-east-1";

/// How to start the function, as Lambda would.
#[derive(Clone, Debug)]
pub struct FunctionConfig {
    /// The binary, and the command the image gives it (`["lambda"]`).
    pub binary: PathBuf,
    pub args: Vec<String>,
    /// The function's own environment variables (the template's, with the
    /// store's settings).
    pub env: Vec<(String, String)>,
    pub name: String,
    pub memory_mb: u32,
    pub timeout: Duration,
    /// Where each environment's log goes (`env-<n>.log`) and its data
    /// directory (`env-<n>/`, as `/tmp` is in Lambda).
    pub work_dir: PathBuf,
}

impl FunctionConfig {
    pub fn arn(&self) -> String {
        format!("arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT}:function:{}", self.name)
    }
}

/// What the function answered to one invocation.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// `POST .../response`: the handler's result.
    Response(Value),
    /// `POST .../error`: the handler failed (a function error).
    Error(Value),
}

/// An invocation that got no answer: Lambda counts each as a function error.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error("the environment could not start: {0}")]
    Start(String),
    #[error("the function failed to initialise: {0}")]
    Init(String),
    #[error("the function exited ({0})")]
    Exited(String),
    #[error("Task timed out after {0:.2} seconds")]
    Timeout(f64),
}

/// The Runtime API's side of one environment: invocations waiting to be
/// polled, and where each one's answer goes.
struct RuntimeApi {
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<(String, Value, i64)>>,
    answers: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    polls: AtomicUsize,
    init_errors: Mutex<Vec<Value>>,
    function_arn: String,
}

/// `GET /2018-06-01/runtime/invocation/next`: waits for an invocation, as the
/// real API does.
async fn next(State(api): State<Arc<RuntimeApi>>) -> impl IntoResponse {
    api.polls.fetch_add(1, Ordering::SeqCst);
    let Some((id, event, deadline_ms)) = api.queue.lock().await.recv().await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, HeaderMap::new(), "no more invocations".to_string());
    };
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    set("lambda-runtime-aws-request-id", id);
    set("lambda-runtime-deadline-ms", deadline_ms.to_string());
    set("lambda-runtime-invoked-function-arn", api.function_arn.clone());
    set("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000;Sampled=0".into());
    set("content-type", "application/json".into());
    (StatusCode::OK, headers, event.to_string())
}

fn json_or_text(body: String) -> Value {
    serde_json::from_str(&body).unwrap_or(Value::String(body))
}

async fn response(State(api): State<Arc<RuntimeApi>>, UrlPath(id): UrlPath<String>, body: String) -> StatusCode {
    answer(&api, &id, Answer::Response(json_or_text(body)))
}

async fn error(State(api): State<Arc<RuntimeApi>>, UrlPath(id): UrlPath<String>, body: String) -> StatusCode {
    answer(&api, &id, Answer::Error(json_or_text(body)))
}

async fn init_error(State(api): State<Arc<RuntimeApi>>, body: String) -> StatusCode {
    api.init_errors.lock().push(json_or_text(body));
    StatusCode::ACCEPTED
}

fn answer(api: &RuntimeApi, id: &str, answer: Answer) -> StatusCode {
    match api.answers.lock().remove(id) {
        Some(waiting) => {
            let _ = waiting.send(answer);
            StatusCode::ACCEPTED
        }
        None => StatusCode::NOT_FOUND,
    }
}

/// One execution environment: the function's process and its Runtime API.
pub struct Environment {
    number: usize,
    api: Arc<RuntimeApi>,
    invocations: mpsc::UnboundedSender<(String, Value, i64)>,
    invoked: AtomicU64,
    child: Child,
    log: PathBuf,
    timeout: Duration,
    server: tokio::task::JoinHandle<()>,
    /// The pool's list of running environments' pids, left when stopped.
    registry: Option<Arc<Mutex<BTreeSet<u32>>>>,
}

impl Environment {
    /// Serves a Runtime API on a port of its own and starts the function
    /// against it; it initialises while the first invocation waits.
    pub async fn start(config: &FunctionConfig, number: usize) -> Result<Environment, InvokeError> {
        let start = |what: &str, e: &dyn std::fmt::Display| InvokeError::Start(format!("{what}: {e}"));
        let (invocations, queue) = mpsc::unbounded_channel();
        let api = Arc::new(RuntimeApi {
            queue: tokio::sync::Mutex::new(queue),
            answers: Mutex::default(),
            polls: AtomicUsize::new(0),
            init_errors: Mutex::default(),
            function_arn: config.arn(),
        });
        let router = axum::Router::new()
            .route(&format!("{RUNTIME}/invocation/next"), axum::routing::get(next))
            .route(&format!("{RUNTIME}/invocation/{{id}}/response"), axum::routing::post(response))
            .route(&format!("{RUNTIME}/invocation/{{id}}/error"), axum::routing::post(error))
            .route(&format!("{RUNTIME}/init/error"), axum::routing::post(init_error))
            .with_state(api.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| start("listen", &e))?;
        let address = listener.local_addr().map_err(|e| start("listen", &e))?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        let data = config.work_dir.join(format!("env-{number}"));
        fs::create_dir_all(&data).map_err(|e| start(&format!("create {}", data.display()), &e))?;
        let log = config.work_dir.join(format!("env-{number}.log"));
        let file = || File::options().create(true).append(true).open(&log);
        let (out, err) = match (file(), file()) {
            (Ok(out), Ok(err)) => (out, err),
            (Err(e), _) | (_, Err(e)) => {
                server.abort();
                return Err(start(&format!("open {}", log.display()), &e));
            }
        };
        // What Lambda gives a function: the Runtime API's address, the
        // function's name, version, memory and log names; then its own
        // variables (the store's settings), and a writable directory.
        let mut command = Command::new(&config.binary);
        command
            .args(&config.args)
            .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", &config.name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", config.memory_mb.to_string())
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", format!("local/[$LATEST]env-{number}"))
            .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{}", config.name))
            .env("AWS_REGION", LOCAL_REGION)
            .envs(config.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("NORTHWIND_DATA_DIR", &data)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                server.abort();
                return Err(start(&config.binary.display().to_string(), &e));
            }
        };
        tracing::debug!(number, pid = child.id(), "local Lambda: an execution environment started");
        Ok(Environment {
            number,
            api,
            invocations,
            invoked: AtomicU64::new(0),
            child,
            log,
            timeout: config.timeout,
            server,
            registry: None,
        })
    }

    pub fn number(&self) -> usize {
        self.number
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Times the function asked the Runtime API for its next invocation.
    pub fn polls(&self) -> usize {
        self.api.polls.load(Ordering::SeqCst)
    }

    /// Invocations handed to it.
    pub fn invoked(&self) -> u64 {
        self.invoked.load(Ordering::SeqCst)
    }

    pub fn log_path(&self) -> &std::path::Path {
        &self.log
    }

    /// One invocation with `event`: what the function answered, or why it
    /// did not within the function's timeout. An environment whose function
    /// timed out or exited is stopped: start another.
    pub async fn invoke(&mut self, event: Value) -> Result<Answer, InvokeError> {
        let id = uuid::Uuid::new_v4().to_string();
        let (tx, mut rx) = oneshot::channel();
        self.api.answers.lock().insert(id.clone(), tx);
        self.invoked.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + self.timeout;
        let deadline_ms = chrono::Utc::now().timestamp_millis() + self.timeout.as_millis() as i64;
        if self.invocations.send((id.clone(), event, deadline_ms)).is_err() {
            return Err(InvokeError::Exited("its Runtime API stopped".into()));
        }
        loop {
            match tokio::time::timeout(Duration::from_millis(100), &mut rx).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(_)) => return Err(InvokeError::Exited("its Runtime API dropped the invocation".into())),
                Err(_) => {
                    if let Some(status) = self.child.try_wait().ok().flatten() {
                        self.api.answers.lock().remove(&id);
                        return Err(match self.init_errors() {
                            errors if !errors.is_empty() => InvokeError::Init(format!("{errors:?}")),
                            _ => InvokeError::Exited(status.to_string()),
                        });
                    }
                    if Instant::now() >= deadline {
                        self.api.answers.lock().remove(&id);
                        self.stop();
                        return Err(InvokeError::Timeout(self.timeout.as_secs_f64()));
                    }
                }
            }
        }
    }

    /// Initialisation errors the function reported.
    pub fn init_errors(&self) -> Vec<Value> {
        self.api.init_errors.lock().clone()
    }

    /// Whether the function's process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last lines of its log, for a failure's message.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        format!(
            "--- lambda environment {} (pid {}):\n{}",
            self.number,
            self.child.id(),
            all[all.len().saturating_sub(lines)..].join("\n")
        )
    }

    /// Stops the function's process by its pid, and the Runtime API.
    pub fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        self.server.abort();
        if let Some(registry) = &self.registry {
            registry.lock().remove(&self.child.id());
        }
    }
}

impl Drop for Environment {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The function's environments: an idle one takes the next invocation, or
/// a new one starts; one that failed is stopped instead of reused.
pub struct Pool {
    config: FunctionConfig,
    idle: Mutex<Vec<Environment>>,
    started: AtomicUsize,
    busy: AtomicUsize,
    most_busy: AtomicUsize,
    running: Arc<Mutex<BTreeSet<u32>>>,
}

impl Pool {
    pub fn new(config: FunctionConfig) -> Pool {
        Pool {
            config,
            running: Arc::default(),
            idle: Mutex::new(Vec::new()),
            started: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            most_busy: AtomicUsize::new(0),
        }
    }

    pub fn config(&self) -> &FunctionConfig {
        &self.config
    }

    pub async fn invoke(&self, event: Value) -> Result<Answer, InvokeError> {
        let idle = self.idle.lock().pop();
        let mut environment = match idle {
            Some(environment) => environment,
            None => {
                let number = self.started.fetch_add(1, Ordering::SeqCst);
                let mut environment = Environment::start(&self.config, number).await?;
                self.running.lock().insert(environment.pid());
                environment.registry = Some(self.running.clone());
                environment
            }
        };
        let busy = self.busy.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_busy.fetch_max(busy, Ordering::SeqCst);
        let result = environment.invoke(event).await;
        self.busy.fetch_sub(1, Ordering::SeqCst);
        if result.is_ok() && environment.running() {
            self.idle.lock().push(environment);
        } else if let Err(err) = &result {
            tracing::warn!(error = %err, "{}", environment.log_tail(5));
        }
        result
    }

    /// Environments started so far, and the most invocations at once.
    pub fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }

    /// The pids of the environments running now, idle or busy.
    pub fn pids(&self) -> Vec<u32> {
        self.running.lock().iter().copied().collect()
    }

    pub fn most_busy(&self) -> usize {
        self.most_busy.load(Ordering::SeqCst)
    }

    /// Stops every idle environment by its pid (a busy one stops when its
    /// invocation ends and it is dropped).
    pub fn stop(&self) {
        let idle = std::mem::take(&mut *self.idle.lock());
        drop(idle);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}
